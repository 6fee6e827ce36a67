"""The shipped MetaWorld suite: its rows, its env (real metaworld 3.1.1 on MuJoCo), the
``metaworld-expert`` agent through the plugin, and a camera-rendered smoke episode.

Kept cheap: a few tasks, state-only except one bounded rendered episode (~0.1-0.4 s a
frame here)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require

from pytest_hud import LocalRuntime, Task, Taskset, run
from pytest_hud.robot import GymBridge, RobotAgent, ZeroModel
from pytest_hud.suites.metaworld import tasks as mw_tasks

pytestmark = pytest.mark.metaworld

MODULE = "pytest_hud.suites.metaworld"
EXPERT = f"{MODULE}:expert_agent"


@pytest.fixture(autouse=True)
def _metaworld() -> None:
    require(importlib.util.find_spec("metaworld"), "metaworld", "run scripts/setup --metaworld")


class Seen:
    """Records the spaces and the first observations an agent saw."""

    spaces: list[Any] = []
    first: list[dict[str, Any]] = []

    def __init__(self, run: Any, spaces: Any) -> None:
        Seen.spaces.append(spaces)

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        if len(Seen.first) < 2:
            Seen.first.append({k: np.array(v) for k, v in data.items()})

    def end(self, ok: bool) -> dict[str, Any]:
        return {}


def rollouts(rows: list[Task], agent: Any) -> list[Any]:
    return asyncio.run(run(rows, agent, LocalRuntime(MODULE), rollout_timeout=240))


# -- rows ----------------------------------------------------------------------------------
def test_rows_name_metaworld_tasks_with_stable_ids() -> None:
    import metaworld
    from metaworld.policies import ENV_POLICY_MAP

    assert list(mw_tasks.MT10) == list(metaworld.env_dict.MT10_V3)
    assert list(mw_tasks.MT50) == list(metaworld.env_dict.ALL_V3_ENVIRONMENTS)
    assert set(mw_tasks.MT50) <= set(ENV_POLICY_MAP)
    assert len(set(mw_tasks.PROMPTS.values())) == 50  # prompts name tasks one-to-one

    mt1, mt10, mt50 = mw_tasks.mt1(), mw_tasks.mt10(), mw_tasks.mt50()
    assert (len(mt1), len(mt10), len(mt50)) == (50, 50, 100)
    assert {t.id for t in mt1} == {"reach-v3"}
    assert list(dict.fromkeys(t.id for t in mt10)) == list(mw_tasks.MT10)
    assert len(mw_tasks.mt10(variations=10)) == 100
    assert all(t.env == "metaworld" and t.metadata["module"] == MODULE for t in mt50)
    for rows in (mt1, mt10, mt50):
        assert len({t.key for t in rows}) == len(rows)
    # ids hash the args: the same row has the same id in every run and every worker
    assert mt10[0].key == "metaworld/reach-v3-c2eb03d8"
    assert mt10[0].args == {"variation": 0, "seed": 0}
    with pytest.raises(ValueError, match="unknown MetaWorld task"):
        mw_tasks.mt1("reach-v2")
    with pytest.raises(ValueError, match="expected 1..50"):
        mw_tasks.mt10(variations=51)


def test_shipped_task_files_match_the_row_functions() -> None:
    for name, (path, rows) in mw_tasks.SUITE_FILES.items():
        assert path.parent.joinpath("__init__.py").exists(), name  # --pyargs needs a package
        loaded = Taskset.load(path)
        assert [t.key for t in loaded] == [t.key for t in rows()], name
        first = json.loads(path.read_text().splitlines()[0])
        assert first["module"] == MODULE


def test_every_row_has_a_template_on_the_env() -> None:
    from pytest_hud.suites import metaworld

    assert set(metaworld.env.templates) == set(mw_tasks.MT50)
    for row in mw_tasks.mt50(variations=1):
        metaworld.env.get_template(row.id).bind(dict(row.args))


# -- the env --------------------------------------------------------------------------------
def test_state_contract_and_the_500_step_limit() -> None:
    """A do-nothing agent: metaworld truncates at max_path_length, no success."""
    Seen.spaces.clear()
    Seen.first.clear()
    agent = RobotAgent(ZeroModel(), name="zero")
    agent.observers.append(Seen)
    (result,) = rollouts(mw_tasks.mt1("reach-v3", 1), agent)
    assert result.error is None, result.error
    assert (result.steps, result.success, result.score) == (500, False, 0.0)
    assert result.prompt == "reach the goal"
    spaces = Seen.spaces[0]
    assert [f.name for f in spaces.observation.values()] == ["observation/state"]
    assert spaces.state.shape == (39,) and spaces.cameras == []
    assert spaces.action_feature.size == 4
    state = Seen.first[0]["observation/state"]
    assert state.shape == (39,) and state.dtype == np.float32


def test_success_is_latched_from_info() -> None:
    """With stop_on_success off, the hand reaches the goal and then leaves it: metaworld's
    info["success"] goes back to 0, the grade stays a success."""
    from metaworld.policies import ENV_POLICY_MAP

    from pytest_hud.suites.metaworld.sim import make_env

    bridge = GymBridge(make_env, make_kwargs={"stop_on_success": False})
    policy = ENV_POLICY_MAP["reach-v3"]()
    try:
        bridge.reset(task="reach-v3", variation=0, seed=0)
        seen_success = []
        for _ in range(120):
            state = bridge.get_observation()[0]["observation/state"][0]
            bridge.step(policy.get_action(state.astype(np.float64))[None])
            seen_success.append(bool(bridge.env.last_info["success"]))
            if seen_success[-1]:
                break
        assert seen_success[-1], "the expert never reached the goal"
        for _ in range(60):  # fly up and away from the goal
            bridge.step(np.array([[0.0, -1.0, 1.0, 0.0]], np.float32))
        assert not bridge.env.last_info["success"], "still at the goal: the test proves nothing"
        grade = bridge.result_slots()[0]
        assert grade["success"] is True and grade["score"] == 1.0
    finally:
        bridge.close()


# -- the expert through the plugin ----------------------------------------------------------
def test_expert_succeeds_on_mt10_tasks_through_the_plugin(pytester: pytest.Pytester) -> None:
    rows = [
        t for t in mw_tasks.mt10(variations=1) if t.id in ("reach-v3", "push-v3", "drawer-close-v3")
    ]
    lines = [json.dumps({**t.to_row(), "module": MODULE}) for t in rows]
    pytester.makefile(".jsonl", mt10_part="\n".join(lines))
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--hud-agent={EXPERT}",
        "--hud-results=results.json",
        timeout=240,
    )
    result.assert_outcomes(passed=3)
    data = json.loads(Path(pytester.path, "results.json").read_text())
    assert data["overall"]["success_rate"] == 1.0
    assert sorted(r["prompt"] for r in data["rollouts"]) == sorted(
        mw_tasks.PROMPTS[t.id] for t in rows
    )


def test_metaworld_expert_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyproject's entry point resolves through the registry: installed as a distribution
    (a dist-info on sys.path, as pip writes it), ``--hud-agent=metaworld-expert`` works."""
    import tomllib

    from pytest_hud.robot import load_agent

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    value = project["project"]["entry-points"]["pytest_hud.agents"]["metaworld-expert"]
    dist = tmp_path / "pytest_hud_suites_probe-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-hud-suites-probe\n")
    (dist / "entry_points.txt").write_text(f"[pytest_hud.agents]\nmetaworld-expert = {value}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    agent = load_agent("metaworld-expert")
    assert isinstance(agent, RobotAgent) and agent.name == "metaworld-expert"
    assert type(agent.model).__name__ == "MetaWorldExpert"


def test_expert_refuses_a_prompt_that_names_no_task() -> None:
    from pytest_hud.suites.metaworld import MetaWorldExpert

    with pytest.raises(LookupError, match="names no MetaWorld task"):
        MetaWorldExpert().infer({"observation/state": np.zeros((1, 39)), "prompt": ["dance"]})
    out = MetaWorldExpert().infer(
        {"observation/state": np.zeros((2, 39)), "prompt": ["reach-v3", "reach the goal"]}
    )
    assert out.shape == (2, 1, 4) and out.dtype == np.float32
    assert np.array_equal(out[0], out[1])


# -- rendering --------------------------------------------------------------------------------
def test_rendered_smoke_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few camera-rendered steps (corner2, 64x64) through the real wire."""
    monkeypatch.setenv("PYTEST_HUD_METAWORLD_CAMERAS", "corner2")
    monkeypatch.setenv("PYTEST_HUD_METAWORLD_SIZE", "64")
    monkeypatch.setenv("MUJOCO_GL", "egl")
    monkeypatch.setenv("PYOPENGL_PLATFORM", "egl")
    from pytest_hud.suites.metaworld import MetaWorldExpert

    Seen.spaces.clear()
    Seen.first.clear()
    agent = RobotAgent(MetaWorldExpert(), max_steps=4)
    agent.observers.append(Seen)
    (result,) = rollouts(mw_tasks.mt1("reach-v3", 1), agent)
    assert result.error is None, result.error
    assert result.steps == 4
    cams = Seen.spaces[0].cameras
    assert [(c.name, c.shape, c.type) for c in cams] == [
        ("observation/images/corner2", (64, 64, 3), "rgb")
    ]
    first, second = (obs["observation/images/corner2"] for obs in Seen.first)
    assert first.shape == (64, 64, 3) and first.dtype == np.uint8
    assert first.std() > 5  # a scene, not a blank frame
    assert not np.array_equal(first, second)  # the arm moved between frames


def test_importing_a_subpackage_keeps_the_row_functions() -> None:
    """``pytest --pyargs pytest_hud.suites.metaworld.mt1`` imports the subpackage ``mt1``,
    which Python binds on the package: the row functions live in ``.tasks`` so nothing
    callable is replaced (a test calling ``metaworld.mt1(...)`` failed after that)."""
    import importlib

    import pytest_hud.suites.metaworld as metaworld
    from pytest_hud.suites.metaworld import tasks

    for name in ("mt1", "mt10", "mt50"):
        importlib.import_module(f"pytest_hud.suites.metaworld.{name}")
        assert callable(getattr(tasks, name))
        assert name not in metaworld.__all__
