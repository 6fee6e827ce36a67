"""The shipped LIBERO suite: its rows (in this venv, without libero), and real rendered
episodes through the wire with the env served from its own docker image.

LIBERO's stack (robosuite 1.4.0, mujoco 3.17, bddl) clashes with this venv's, so the sim
runs in the image ``--hud-runtime=docker`` builds from the suite's ``REQUIRES``/``APT``
(``AutoDockerRuntime``; ``scripts/setup --all`` prebuilds it, so these tests hit the
cache; cold it builds here in minutes, hence the generous timeouts). A rendered step
costs 0.2-4 s here (llvmpipe, and a loaded machine), so the episodes are a few dozen
steps at 128 px. Skips only when no Docker engine is reachable (fails instead under
PYTEST_HUD_REQUIRE_ALL=1).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import numpy as np
import pytest
from docker_helpers import engine
from needs import require, require_lerobot

from pytest_hud import Taskset, run
from pytest_hud.robot import RandomModel, RobotAgent
from pytest_hud.robot.contract import Contract
from pytest_hud.suites.libero import tasks as lb_tasks
from pytest_hud.suites.libero.sim import quat_to_axis_angle

pytestmark = [pytest.mark.libero, pytest.mark.docker]

MODULE = "pytest_hud.suites.libero"
IMAGES = ["observation/images/image", "observation/images/image2"]
SIZE = 128


# -- rows: this venv, libero never imported -------------------------------------------
def test_rows_for_every_suite() -> None:
    counts = {suite: len(names) for suite, names in lb_tasks.SUITES.items()}
    assert counts == {
        "libero_spatial": 10,
        "libero_object": 10,
        "libero_goal": 10,
        "libero_10": 10,
        "libero_90": 90,
    }
    assert len(lb_tasks.TASKS) == 130  # task names are unique across the suites
    assert set(lb_tasks.MAX_STEPS) == set(lb_tasks.SUITES)
    ten = lb_tasks.rows("libero_10")
    assert len(ten) == 500 and len({t.key for t in ten}) == 500
    first = ten[0]
    assert first.env == "libero" and first.metadata["module"] == MODULE
    assert (
        first.id
        == "LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket"
    )
    assert first.args == {"init_state": 0}
    assert lb_tasks.TASKS[first.id] == (
        "libero_10",
        "put both the alphabet soup and the tomato sauce in the basket",
    )
    assert [t.args["init_state"] for t in lb_tasks.rows("libero_goal", 3)[:4]] == [0, 1, 2, 0]
    with pytest.raises(ValueError, match="unknown LIBERO suite"):
        lb_tasks.rows("libero_100")
    with pytest.raises(ValueError, match="expected 1..50"):
        lb_tasks.rows("libero_10", 51)
    with pytest.raises(LookupError, match="unknown LIBERO task"):
        lb_tasks.suite_of("open_the_door")


def test_shipped_task_files_match_the_row_functions() -> None:
    expected = {"libero_spatial": 500, "libero_object": 500, "libero_goal": 500}
    expected |= {"libero_10": 500, "libero_90": 900}
    for suite in lb_tasks.SUITES:
        path, make = lb_tasks.SUITE_FILES[suite]
        assert path.parent.joinpath("__init__.py").exists(), suite  # --pyargs needs a package
        loaded = Taskset.load(path)
        assert [t.key for t in loaded] == [t.key for t in make()], suite
        assert len(loaded) == expected[suite]
        assert json.loads(path.read_text().splitlines()[0])["module"] == MODULE


def test_every_task_has_a_template_and_libero_stays_out_of_this_venv() -> None:
    from pytest_hud.suites import libero

    assert set(libero.env.templates) == set(lb_tasks.TASKS)
    for suite in lb_tasks.SUITES:
        for row in lb_tasks.rows(suite, 1):
            libero.env.get_template(row.id).bind(dict(row.args))
    spaces = Contract.from_dict(libero.contract(SIZE)).spaces()
    assert [f.name for f in spaces.cameras] == IMAGES
    assert spaces.state.shape == (8,) and spaces.action_feature.size == 7
    assert not {"libero", "robosuite", "bddl"} & set(sys.modules)


def test_subprocess_runtime_serves_the_module_with_the_named_python() -> None:
    """``--hud-runtime=subprocess:PYTHON`` (the LIBERO venv's python) for each row."""
    from pytest_hud.runtime.placement import provider_for

    substrate: Any = provider_for("subprocess:/opt/libero/bin/python")(
        lb_tasks.rows("libero_goal", 1)[0]
    )
    assert substrate.argv[:3] == ["/opt/libero/bin/python", "-m", "pytest_hud.serve"]
    assert substrate.argv[3] == MODULE  # the row's module column, imported there


def test_pi05_keys_map_by_name_from_libero_observations() -> None:
    """pi05_libero's input names, in any order, get the camera of the same name."""
    from pytest_hud.robot.agent.adapter import LeRobotAdapter
    from pytest_hud.suites import libero

    spaces = Contract.from_dict(libero.contract(4)).spaces()
    keys = ["observation.images.image2", "observation.images.image"]
    adapter = LeRobotAdapter(keys).bind(spaces)
    data = {key: np.full((4, 4, 3), i * 255, np.uint8) for i, key in enumerate(IMAGES)}
    data["observation/state"] = np.arange(8, dtype=np.float32)
    row = adapter.observation(data, "open the middle drawer of the cabinet")
    assert set(row) == {*keys, "observation.state", "task"}
    assert row["observation.images.image"].max() == 0.0  # agentview
    assert row["observation.images.image2"].min() == 1.0  # wrist
    assert row["observation.images.image2"].shape == (3, 4, 4)
    assert row["observation.state"].tolist() == list(range(8))
    assert row["task"] == "open the middle drawer of the cabinet"


def test_state_orientation_is_robosuites_axis_angle() -> None:
    half = np.sqrt(0.5)
    assert np.allclose(quat_to_axis_angle(np.array([0.0, 0.0, 0.0, 1.0])), 0.0)
    # 90 degrees about z, xyzw
    assert np.allclose(quat_to_axis_angle(np.array([0.0, 0.0, half, half])), [0, 0, np.pi / 2])
    # 180 degrees about x: the gripper pointing down, LIBERO's usual pose
    assert np.allclose(quat_to_axis_angle(np.array([1.0, 0.0, 0.0, 0.0])), [np.pi, 0, 0])


# -- episodes: the sim in the LIBERO image ---------------------------------------------
class Seen:
    """The spaces and observations an agent saw."""

    spaces: list[Any] = []
    frames: list[dict[str, Any]] = []

    def __init__(self, run: Any, spaces: Any) -> None:
        Seen.spaces.append(spaces)

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        Seen.frames.append({k: np.array(v) for k, v in data.items()})

    def end(self, ok: bool) -> dict[str, Any]:
        return {}


@pytest.fixture
def libero_docker(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A provider serving the suite in its auto-built image (built, or found, on the
    first acquisition), as ``--hud-runtime=docker`` does; 128 px cameras (the
    container gets the host's ``PYTEST_HUD_*`` and render backend variables)."""
    client = engine()
    require(client, "a Docker engine", "start one with .ci/docker-up (or scripts/setup --docker)")
    from pytest_hud.runtime.docker.auto import AutoDockerRuntime
    from pytest_hud.suites import libero

    monkeypatch.setenv("PYTEST_HUD_LIBERO_SIZE", str(SIZE))
    Seen.spaces.clear()
    Seen.frames.clear()
    return AutoDockerRuntime([libero.__file__], boot_timeout=600).serving(MODULE)


@pytest.mark.timeout(3600)  # a cold image: pip ~2 min + a 2.4 GB layer, see the README
def test_rendered_smoke_episode_through_the_wire(
    libero_docker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A random agent for 24 rendered steps of a libero_10 task from init state 3, in the
    container, rendering with the backend chosen on the host (OSMesa here)."""
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setenv("PYOPENGL_PLATFORM", "osmesa")
    row = lb_tasks.rows("libero_10", 4)[3]
    agent = RobotAgent(RandomModel(seed=0), max_steps=24, name="random")
    agent.observers.append(Seen)
    (result,) = asyncio.run(run([row], agent, libero_docker, rollout_timeout=1500))
    assert result.error is None, result.error
    assert (result.steps, result.success) == (24, False)
    assert result.prompt == "put both the alphabet soup and the tomato sauce in the basket"
    spaces = Seen.spaces[0]
    assert [f.name for f in spaces.cameras] == IMAGES
    assert spaces.state.shape == (8,) and spaces.action_feature.size == 7
    assert len(Seen.frames) == 24
    first, last = Seen.frames[0], Seen.frames[-1]
    for key in IMAGES:
        assert first[key].shape == (SIZE, SIZE, 3) and first[key].dtype == np.uint8
        assert first[key].std() > 5  # a rendered scene, not a blank frame
    state = first["observation/state"]
    assert state.dtype == np.float32 and np.all(np.isfinite(state))
    assert 0.5 < np.linalg.norm(state[3:6]) < 2 * np.pi  # a real orientation
    assert state[6] > 0 > state[7]  # the two finger joints, open symmetric
    assert not np.allclose(last["observation/state"][:3], state[:3])  # the arm moved


@pytest.mark.timeout(3600)
def test_render_backend_choice_reaches_the_container(
    libero_docker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's MUJOCO_GL is the container's: a bogus one fails the image's own render
    preflight at boot, with the fix, as it would locally (this process imported the
    module before, with the real backend)."""
    monkeypatch.setenv("MUJOCO_GL", "bogus-gl")
    row = lb_tasks.rows("libero_goal", 1)[0]
    agent = RobotAgent(RandomModel(seed=0), max_steps=2, name="random")
    (result,) = asyncio.run(run([row], agent, libero_docker, rollout_timeout=900))
    assert result.error is not None and not result.steps
    assert "before its env server answered" in result.error  # the container's boot
    assert "MUJOCO_GL='bogus-gl': expected one of" in result.error  # its preflight's log


@pytest.mark.lerobot_version
@pytest.mark.timeout(3600)
def test_pi05_inputs_from_libero_end_to_end(libero_docker: Any, tmp_path) -> None:
    """``--hud-agent=pi05:PATH`` on LIBERO: the cameras, state and instruction reach the
    policy's inputs under pi05's LIBERO names. A real pi0.5 (PaliGemma, ~3B parameters,
    its tokenizer from the hub) cannot be built offline on this CPU, so the stand-in is a
    tiny random ACT with pi05_libero's input features (two 3x128x128 images under
    ``observation.images.image``/``image2`` listed in reverse order, an 8-d state, a 7-d
    action); ACT ignores the language, so the prompt is checked at the model's input."""
    require_lerobot()
    from lerobot_fixtures import make_tiny_act

    from pytest_hud.robot.agent.registry import load_agent

    keys = ["observation.images.image2", "observation.images.image"]
    folder = make_tiny_act(
        tmp_path / "pi05_like",
        image_shape=(3, SIZE, SIZE),
        state_dim=8,
        action_dim=7,
        image_key=keys,
    )
    agent = load_agent(f"pi05:{folder}")
    assert agent.name == f"pi05:{folder}"
    batches: list[dict[str, Any]] = []
    infer = agent.model.infer

    def spy(batch: dict[str, Any]) -> np.ndarray:
        batches.append(batch)
        return infer(batch)

    agent.model.infer = spy  # type: ignore[method-assign]
    agent.max_steps = 10
    agent.observers.append(Seen)
    row = lb_tasks.rows("libero_spatial", 1)[0]
    (result,) = asyncio.run(run([row], agent, libero_docker, rollout_timeout=1500))
    assert result.error is None, result.error
    assert result.steps == 10
    batch = batches[0]
    assert set(batch) == {*keys, "observation.state", "task"}
    assert list(batch["task"]) == [lb_tasks.TASKS[row.id][1]]
    assert batch["observation.state"].shape == (1, 8)
    env_first = Seen.frames[0]
    for key in keys:  # by name, not by order: image2 is the wrist camera
        env_key = key.replace(".", "/")
        assert batch[key].shape == (1, 3, SIZE, SIZE)
        expected = env_first[env_key].transpose(2, 0, 1).astype(np.float32) / 255.0
        assert np.allclose(batch[key][0], expected)
    assert np.allclose(batch["observation.state"][0], env_first["observation/state"])


# -- LIBERO-PRO's perturbations of the same rows -----------------------------------------------
def test_pro_rows_are_the_base_rows_with_a_perturbation() -> None:
    assert len(lb_tasks.PRO_SUITES) == 16  # 4 suites x lan, object, swap, task (env ships none)
    for suite, path in lb_tasks.PRO_FILES.items():
        base, perturbation = suite.rsplit("_", 1)
        assert perturbation in lb_tasks.PERTURBATIONS
        assert path.parent.joinpath("__init__.py").exists(), suite
        loaded = Taskset.load(path)
        assert [t.key for t in loaded] == [t.key for t in lb_tasks.pro_rows(suite)]
        assert [(t.id, t.args["init_state"]) for t in loaded] == [
            (t.id, t.args["init_state"]) for t in lb_tasks.rows(base)
        ]
        assert {t.args["perturbation"] for t in loaded} == {perturbation}
    # the instruction: reworded (lan), a new goal (task), the base one (object, swap)
    name = "put_the_bowl_on_the_stove"
    assert lb_tasks.prompt_of(name) == "put the bowl on the stove"
    assert lb_tasks.prompt_of(name, "lan") == "place the bowl on the stove"
    assert lb_tasks.prompt_of(name, "task") == "put the plate on the stove"
    assert lb_tasks.prompt_of(name, "swap") == lb_tasks.prompt_of(name, "object")
    assert lb_tasks.prompt_of(name, "swap") == "put the bowl on the stove"
    with pytest.raises(ValueError, match="no perturbation 'env' of libero_goal"):
        lb_tasks.prompt_of(name, "env")
    with pytest.raises(ValueError, match="unknown LIBERO-PRO suite"):
        lb_tasks.pro_rows("libero_90_swap")


@pytest.mark.timeout(3600)
def test_pro_swap_builds_the_perturbed_scene_in_the_image(libero_docker: Any) -> None:
    """A libero_goal row and its LIBERO-PRO swap (the same init state index): two
    containers, the perturbed .bddl's scene (the objects' places swapped: the agentview
    differs, the arm's start does not); the task perturbation's prompt is its new goal."""
    base = lb_tasks.rows("libero_goal", 1)[1]  # put the bowl on the stove
    swap = base.with_args(perturbation="swap")
    task = base.with_args(perturbation="task")
    agent = RobotAgent(RandomModel(seed=0), max_steps=1, name="random")
    agent.observers.append(Seen)
    results, frames = [], []
    for row in (base, swap, task):  # one at a time: each first frame is that row's
        Seen.frames.clear()
        (result,) = asyncio.run(run([row], agent, libero_docker, rollout_timeout=1500))
        assert result.error is None, result.error
        assert result.steps == 1 and not result.success
        results.append(result)
        frames.append(Seen.frames[0])
    assert [r.prompt for r in results] == [
        "put the bowl on the stove",
        "put the bowl on the stove",
        "put the plate on the stove",
    ]
    first, swapped = frames[0], frames[1]
    view = "observation/images/image"
    assert np.abs(first[view].astype(int) - swapped[view].astype(int)).mean() > 1.0
    assert np.allclose(first["observation/state"][:3], swapped["observation/state"][:3], atol=0.02)
