"""LeRobot checkpoints as agents: upstream parity, PushT end to end, batching, mismatches.

The checkpoints are tiny random policies saved like real ones (tests/helpers/lerobot_fixtures.py).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require_lerobot

from pytest_hud import LocalRuntime, Shared, Task, run
from pytest_hud.plumbing.loader import load_module
from pytest_hud.robot import BatchedAgent, Contract, LeRobotAdapter, load_agent
from pytest_hud.robot.agent.model import stack_rows

pytestmark = pytest.mark.lerobot_version

HERE = Path(__file__).resolve().parents[1] / "helpers"
PUSHT_ENV = HERE / "envs" / "pusht_env.py"
MAX_STEPS = 30
PUSHT_CONTRACT = {
    "features": {
        "pixels": {"role": "observation", "type": "rgb", "shape": [96, 96, 3]},
        "agent_pos": {"role": "observation", "shape": [2]},
        "action": {"role": "action", "shape": [2]},
    }
}


@pytest.fixture(autouse=True)
def _lerobot() -> None:
    require_lerobot()


def pusht_observations(n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "pixels": rng.integers(0, 256, (96, 96, 3), dtype=np.uint8),
            "agent_pos": rng.uniform(0, 512, 2).astype(np.float32),
        }
        for _ in range(n)
    ]


def upstream_actions(policy, pre, post, observations, prompt: str, steps: int) -> np.ndarray:
    """lerobot-eval's loop on a batch of env observations held fixed: preprocess_observation,
    the task, the preprocessor, ``select_action`` ``steps`` times, the postprocessor."""
    import torch
    from lerobot.envs.utils import preprocess_observation

    stacked = {k: np.stack([o[k] for o in observations]) for k in observations[0]}
    policy.reset()
    out = []
    with torch.inference_mode():
        for _ in range(steps):
            obs = preprocess_observation(stacked)
            obs["task"] = [prompt] * len(observations)
            out.append(post(policy.select_action(pre(obs))))
    policy.reset()
    return torch.stack(out, dim=1).numpy()


def model_actions(model, observations, prompt: str, image_keys: list[str]) -> np.ndarray:
    adapter = LeRobotAdapter(image_keys).bind(Contract.from_dict(PUSHT_CONTRACT).spaces())
    return model.infer(stack_rows([adapter.observation(o, prompt) for o in observations]))


# -- (a) parity with upstream ------------------------------------------------------------------
def test_act_chunk_matches_upstream_select_action(tiny_act_path: Path) -> None:
    from pytest_hud.robot import LeRobotModel
    from pytest_hud.robot.agent.lerobot import load_policy

    policy, pre, post = load_policy(tiny_act_path)
    model = LeRobotModel(policy, pre, post)
    observations = pusht_observations(3)
    ours = model_actions(model, observations, "push", ["observation.image"])
    steps = policy.config.n_action_steps
    assert ours.shape == (3, policy.config.chunk_size, 2) and ours.dtype == np.float32
    theirs = upstream_actions(policy, pre, post, observations, "push", steps)
    np.testing.assert_array_equal(ours[:, :steps], theirs)
    # a row's chunk does not depend on the rows batched with it
    alone = model_actions(model, observations[1:2], "push", ["observation.image"])
    np.testing.assert_allclose(alone[0], ours[1], rtol=1e-5, atol=1e-3)


def test_history_policy_repeats_the_observation_like_an_episode_start(tmp_path: Path) -> None:
    """Diffusion stacks n_obs_steps observations; a stateless model feeds the current one
    n_obs_steps times, exactly as select_action does at an episode's first step."""
    import torch
    from lerobot_fixtures import make_tiny_diffusion

    from pytest_hud.robot.agent.lerobot import LeRobotModel, load_policy

    policy, pre, post = load_policy(make_tiny_diffusion(tmp_path / "dp"))
    model = LeRobotModel(policy, pre, post)
    observations = pusht_observations(2, seed=1)
    torch.manual_seed(7)
    ours = model_actions(model, observations, "push", ["observation.image"])
    torch.manual_seed(7)
    theirs = upstream_actions(policy, pre, post, observations, "push", 8)
    assert ours.shape == (2, 8, 2)
    np.testing.assert_array_equal(ours, theirs)
    assert all(len(q) == 0 for q in policy._queues.values())  # no state left behind


class EpisodeLog:
    """An episode observer keeping every observation the agent acted on, and the action."""

    def __init__(self, seen: list[tuple[dict[str, np.ndarray], np.ndarray]]) -> None:
        self.seen = seen

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        self.seen.append(({k: np.array(v) for k, v in data.items()}, np.array(action)))

    def end(self, ok: bool) -> dict[str, Any]:
        return {}


@pytest.mark.anyio
async def test_history_policy_sees_the_episodes_history_like_lerobot_eval(
    tmp_path: Path,
) -> None:
    """A Diffusion policy (n_obs_steps=2) driven by the agent over PushT acts exactly as
    select_action does on the same observations: the agent sends each inference the last
    two observations, so the policy's queues hold what they would hold upstream."""
    import torch
    from lerobot_fixtures import make_tiny_diffusion

    from pytest_hud.robot.agent.lerobot import load_policy, torch_thread

    path = make_tiny_diffusion(tmp_path / "dp")
    agent = load_agent(f"lerobot:{path}")
    assert agent.model.n_obs_steps == 2 and agent.chunk_size == 8
    agent.max_steps = 24  # three inferences, at ticks 0, 8 and 16
    seen: list[tuple[dict[str, np.ndarray], np.ndarray]] = []
    agent.observers.append(lambda run, spaces: EpisodeLog(seen))
    torch.manual_seed(11)  # the diffusion noise: drawn once per inference on both sides
    [res] = await run([Task("pusht", "push", {"seed": 2})], agent, LocalRuntime(PUSHT_ENV))
    assert res.error is None and res.agent_info["inferences"] == 3 and len(seen) == 24
    # upstream, replayed on the observations the agent saw, one select_action per tick, on
    # the thread the agent ran torch on: under xdist that thread has its share of the cores
    # (torch_thread), and another intra-op thread count sums in another order
    from lerobot.envs.utils import preprocess_observation

    policy, pre, post = load_policy(path)

    def replay() -> list[np.ndarray]:
        torch.manual_seed(11)
        policy.reset()
        theirs = []
        with torch.inference_mode():
            for data, _ in seen:
                obs = preprocess_observation({k: v[None] for k, v in data.items()})
                obs["task"] = [res.prompt]
                theirs.append(post(policy.select_action(pre(obs)))[0].numpy())
        return theirs

    theirs = torch_thread().submit(replay).result(timeout=300)
    ours = np.stack([action for _, action in seen])
    np.testing.assert_allclose(ours, np.stack(theirs), rtol=1e-5, atol=1e-5)
    # the observations really changed between ticks, so the history mattered
    assert not np.array_equal(seen[7][0]["agent_pos"], seen[8][0]["agent_pos"])


def test_loading_errors_name_the_checkpoint(
    tmp_path: Path, tiny_act_path: Path, monkeypatch
) -> None:
    import huggingface_hub.constants

    from pytest_hud.robot import AgentSpecError
    from pytest_hud.robot.agent.lerobot import CheckpointError

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no retries
    with pytest.raises(CheckpointError, match=r"no LeRobot checkpoint folder at '/nonexistent/x'"):
        load_agent("lerobot:/nonexistent/x")
    with pytest.raises(CheckpointError, match="has no config.json"):
        load_agent(f"lerobot:{tmp_path}")
    with pytest.raises(AgentSpecError) as err:
        load_agent("pi05")
    message = str(err.value)
    assert "lerobot/pi05_libero_finetuned" in message and "hub" in message
    assert "--hud-agent=pi05:/path/to/pi05_libero_finetuned" in message
    assert load_agent(f"pi05:{tiny_act_path}").name == f"pi05:{tiny_act_path}"  # a local copy


# -- (b) end to end on PushT -------------------------------------------------------------------
class ActionLog:
    """An episode observer keeping every executed action and the camera's shape."""

    def __init__(self, log: list[np.ndarray], shapes: set) -> None:
        self.log, self.shapes = log, shapes

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        self.log.append(np.asarray(action))
        self.shapes.add(data["pixels"].shape)

    def end(self, ok: bool) -> dict[str, Any]:
        return {}


def record_threads(obj: Any, name: str) -> set[str]:
    """Wrap ``obj.name`` to collect the names of the threads that call it."""
    seen: set[str] = set()
    original = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.add(threading.current_thread().name)
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)
    return seen


@pytest.mark.anyio
async def test_lerobot_agent_on_pusht(tiny_act_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_hud.robot.agent.lerobot as lerobot_module

    # monkeypatch first, so teardown restores the original over the recording wrapper
    monkeypatch.setattr(lerobot_module, "_load_policy", lerobot_module._load_policy)
    loaded_on = record_threads(lerobot_module, "_load_policy")
    agent = load_agent(f"lerobot:{tiny_act_path}")
    ran_on = record_threads(agent.model.policy, "predict_action_chunk")
    assert agent.chunk_size == 8  # the policy's n_action_steps (its chunk is 10)
    agent.max_steps = MAX_STEPS
    actions: list[np.ndarray] = []
    shapes: set = set()
    agent.observers.append(lambda run, spaces: ActionLog(actions, shapes))
    [res] = await run([Task("pusht", "push", {"seed": 1})], agent, LocalRuntime(PUSHT_ENV))
    assert res.error is None, res.error
    info = res.agent_info
    assert info["steps"] == MAX_STEPS and info["truncated_by_agent"] is True
    assert info["inferences"] == math.ceil(MAX_STEPS / agent.chunk_size) == 4
    assert res.steps == MAX_STEPS and isinstance(res.success, bool) and res.score is not None
    executed = np.stack(actions)
    assert executed.shape == (MAX_STEPS, 2) and shapes == {(96, 96, 3)}
    assert ((executed >= 0) & (executed <= 512)).all()  # PushT's action box
    assert len({tuple(a) for a in executed}) > 1
    # all torch work on one thread: the load and every forward (see torch_thread)
    assert len(loaded_on) == 1 and loaded_on == ran_on
    assert next(iter(ran_on)).startswith("pytest-hud-torch")


# -- (c) batched rollouts ----------------------------------------------------------------------
def pusht4(task: Task):
    """One vectorized PushT sim with four slots."""
    return load_module(PUSHT_ENV, fresh=True).build(num_envs=4)


@pytest.mark.anyio
async def test_batched_agent_four_pusht_rollouts(tiny_act_path: Path) -> None:
    inner = load_agent(f"lerobot:{tiny_act_path}")
    inner.max_steps = MAX_STEPS
    ran_on = record_threads(inner.model.policy, "predict_action_chunk")
    agent = BatchedAgent(inner, max_wait_s=2.0)
    tasks = [Task("pusht", "push", {"seed": s}) for s in range(4)]
    results = await run(tasks, agent, Shared(LocalRuntime(pusht4), width=4), max_concurrent=4)
    assert [r.error for r in results] == [None] * 4, [r.error for r in results]
    assert all(r.steps == MAX_STEPS and isinstance(r.success, bool) for r in results)
    widths = agent.batched.batches
    assert sum(widths) == sum(r.agent_info["inferences"] for r in results) == 4 * 4
    assert max(widths) == 4 and len(widths) < 16  # real batched forwards happened
    assert len(ran_on) == 1 and next(iter(ran_on)).startswith("pytest-hud-torch")


# -- (d) cameras that do not match the policy --------------------------------------------------
@pytest.mark.anyio
async def test_policy_with_two_cameras_on_a_one_camera_env(tmp_path: Path) -> None:
    from lerobot_fixtures import make_tiny_act

    keys = ["observation.images.top", "observation.images.wrist"]
    agent = load_agent(f"lerobot:{make_tiny_act(tmp_path / 'two_cams', image_key=keys)}")
    [res] = await run([Task("pusht", "push", {"seed": 0})], agent, LocalRuntime(PUSHT_ENV))
    assert res.error_type == "AdapterError" and res.phase == "agent"
    assert "expects 2 camera(s) ['observation.images.top', 'observation.images.wrist']" in res.error
    assert "the env has 1 ['pixels']" in res.error
