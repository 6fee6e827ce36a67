"""GymBridge and env targets: real gymnasium envs served over the real wire."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from procs import alive, live_children_of
from sims import make_pendulum, make_succeed_at

from pytest_hud.robot import Contract, GymBridge, RobotClient, RobotEndpoint
from pytest_hud.robot.sim.gym import gym_target

PUSHT = "gym_pusht:gym_pusht/PushT-v0"


async def spawned(inline: bool = False, **kwargs) -> AsyncIterator[RobotEndpoint]:
    endpoint = RobotEndpoint(GymBridge, kwargs=kwargs, inline=inline)
    await endpoint.start()
    try:
        yield endpoint
    finally:
        await endpoint.stop()


async def drive(client: RobotClient, policy, limit: int = 1000) -> list[dict]:
    seen = [await client.get_observation()]
    while not seen[-1]["terminated"] and len(seen) <= limit:
        seen.append(await client.step(policy(seen[-1])))
    return seen


@pytest.mark.anyio
async def test_state_only_classic_control_episode() -> None:
    async for ep in spawned(target="Pendulum-v1"):
        contract = ep.contract
        assert contract.control_rate == 30.0  # Pendulum's render_fps
        state = contract.features["observation/state"]
        assert state.role == "observation" and state.shape == (3,) and state.dtype == "float32"
        assert contract.features["action"].stats == {"min": [-2.0], "max": [2.0]}
        run = await ep.reset(seed=7)
        assert run["prompt"] == "Pendulum-v1"
        async with await RobotClient.connect(ep.url, token=run["token"]) as client:
            seen = await drive(client, lambda o: [0.5])
        grade = await ep.result(run["token"])
    assert len(seen) == 201 and seen[-1]["terminated"]
    assert all(o["data"]["observation/state"].dtype == np.float32 for o in seen)
    rewards = sum(o["reward"] for o in seen[1:])
    assert grade["steps"] == 200 and grade["success"] is False
    assert grade["total_reward"] == pytest.approx(rewards, rel=1e-5)
    # the same seed and actions replay the same episode in a local env
    local = gym.make("Pendulum-v1")
    first, _ = local.reset(seed=7)
    np.testing.assert_allclose(seen[0]["data"]["observation/state"], first, rtol=1e-6)


@pytest.mark.anyio
async def test_an_inline_env_steps_the_episode_a_sim_process_steps() -> None:
    """``env.gym(..., inline=True)``: the env in this process, the same episode."""
    from pytest_hud import Environment

    endpoint = Environment("inline-pendulum").gym("Pendulum-v1", inline=True)
    assert endpoint.inline
    episodes = []
    for inline in (False, True):
        async for ep in spawned(target="Pendulum-v1", inline=inline):
            assert (ep.pid is None) is inline
            run = await ep.reset(seed=7)
            async with await RobotClient.connect(ep.url, token=run["token"]) as client:
                seen = await drive(client, lambda o: [0.5])
            episodes.append(
                ([o["data"]["observation/state"] for o in seen], await ep.result(run["token"]))
            )
    (want, want_grade), (got, got_grade) = episodes
    assert got_grade == want_grade and len(got) == len(want) == 201
    np.testing.assert_array_equal(np.stack(got), np.stack(want))


@pytest.mark.anyio
async def test_image_env_pusht() -> None:
    async for ep in spawned(target=PUSHT, make_kwargs={"obs_type": "pixels_agent_pos"}):
        feats = ep.contract.features
        assert feats["pixels"].type == "rgb" and feats["pixels"].shape == (96, 96, 3)
        assert feats["agent_pos"].shape == (2,) and feats["agent_pos"].type is None
        assert ep.contract.spaces().cameras[0].name == "pixels"
        assert ep.contract.control_rate == 10.0
        run = await ep.reset(seed=1)
        rng = np.random.default_rng(0)

        def wander(_obs: dict, rng: np.random.Generator = rng) -> np.ndarray:
            return rng.uniform(100, 400, 2)

        async with await RobotClient.connect(ep.url, token=run["token"]) as client:
            seen = await drive(client, wander)
        grade = await ep.result(run["token"])
    pixels = [o["data"]["pixels"] for o in seen]
    assert all(p.shape == (96, 96, 3) and p.dtype == np.uint8 for p in pixels)
    assert not np.array_equal(pixels[0], pixels[-1])  # the agent moved on screen
    assert seen[-1]["data"]["agent_pos"].dtype == np.float32
    assert grade["steps"] == len(seen) - 1 == 300  # PushT's time limit
    assert isinstance(grade["success"], bool)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_vectorized_env_four_slots_with_their_own_seeds(mode: str) -> None:
    """The same episodes whether the copies step in the sim process ("sync") or each in
    its own worker process ("async", gymnasium's AsyncVectorEnv: the sim forks them, which
    hung in the workers' start-up while the lifeline thread held sys.stdin's lock)."""
    import asyncio

    workers: set[int] = set()
    async for ep in spawned(target="CartPole-v1", num_envs=4, vectorization_mode=mode):
        assert ep.num_envs == 4
        assert ep.pid is not None
        workers = live_children_of(ep.pid)
        assert len(workers) == (4 if mode == "async" else 0), workers
        assert ep.contract.features["action"].extra == {"n": 2}
        runs = [await ep.reset(seed=100 + i) for i in range(4)]
        clients = [await RobotClient.connect(ep.url, token=r["token"]) for r in runs]
        try:
            # each slot its own policy: slots end at different times
            policies = [lambda o: [0], lambda o: [1], lambda o: [0], lambda o: [1]]
            episodes = await asyncio.gather(
                *(drive(c, p) for c, p in zip(clients, policies, strict=True))
            )
        finally:
            for c in clients:
                await c.close()
        grades = [await ep.result(r["token"]) for r in runs]
    for i, (seen, grade) in enumerate(zip(episodes, grades, strict=True)):
        assert seen[-1]["terminated"] and grade["steps"] == len(seen) - 1
        assert grade["total_reward"] == grade["steps"]  # CartPole pays 1 per step
        local = gym.make("CartPole-v1")
        first, _ = local.reset(seed=100 + i)  # each slot really got its own seed
        np.testing.assert_allclose(seen[0]["data"]["observation/state"], first, rtol=1e-6)
        expected = 0
        obs = first
        for _ in range(len(seen) - 1):  # and replays like a local env under the same actions
            obs, _, term, trunc, _ = local.step(0 if i % 2 == 0 else 1)
            expected += 1
            if term or trunc:
                break
        np.testing.assert_allclose(seen[-1]["data"]["observation/state"], obs, rtol=1e-5)
        assert grade["steps"] == expected
    assert not any(alive(w) for w in workers), "the vector env's workers outlived the sim"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vectorization_mode": "threads"}, "vectorization_mode is one of 'sync', 'async'"),
        (
            {"vectorization_mode": "async", "step_slots_alone": True},
            "cannot with vectorization_mode=.async.: drop one of the two",
        ),
    ],
)
def test_vectorization_mode_is_checked_where_it_is_declared(kwargs: dict, match: str) -> None:
    from pytest_hud import Environment

    with pytest.raises(ValueError, match=match):
        Environment("vector-check").gym("CartPole-v1", num_envs=2, **kwargs)
    with pytest.raises(ValueError, match=match):
        GymBridge("CartPole-v1", num_envs=2, **kwargs)


def test_a_factory_steps_in_worker_processes_with_async() -> None:
    bridge = GymBridge(make_pendulum, num_envs=2, vectorization_mode="async")
    try:
        bridge.reset(seed=3)
        assert type(bridge.env) is gym.vector.AsyncVectorEnv
        bridge.step(np.zeros((2, 1), np.float32))
        obs, done, _ = bridge.get_observation()
        assert obs["observation/state"].shape == (2, 3) and not done.any()
    finally:
        bridge.close()


def test_build_args_rebuild_episodic_args_do_not() -> None:
    bridge = GymBridge(make_pendulum)
    bridge.reset(g=9.8, seed=1)
    env = bridge.env
    assert env.unwrapped.g == 9.8
    bridge.reset(g=9.8, seed=2)
    assert bridge.env is env  # only the seed changed: same env
    bridge.reset(g=3.0, seed=2)
    assert bridge.env is not env and bridge.env.unwrapped.g == 3.0
    bridge.close()


def test_episodic_args_reach_reset_options_and_success_latches() -> None:
    bridge = GymBridge(make_succeed_at)
    bridge.reset(at=2, difficulty=5, seed=0)
    assert bridge.env.unwrapped.options == {"difficulty": 5}
    for _ in range(4):
        bridge.step(np.zeros((1, 1), np.float32))
    _, done, _ = bridge.get_observation()
    assert done.tolist() == [True]
    grade = bridge.result_slots()[0]
    # is_success was true only at step 2, the episode ended at step 4: success stays latched
    assert grade == {
        "score": 1.0,
        "success": True,
        "total_reward": 4.0,
        "steps": 4,
        "terminated": True,
        "truncated": False,
    }
    bridge.step(np.zeros((1, 1), np.float32))  # a finished single env is not stepped again
    assert bridge.result_slots()[0]["steps"] == 4
    bridge.close()


def test_fps_from_render_fps_or_explicit() -> None:
    assert GymBridge(make_succeed_at).ensure_contract().control_rate == 7.0
    assert GymBridge(make_succeed_at, fps=20).ensure_contract().control_rate == 20.0


def test_success_threshold_on_total_reward() -> None:
    bridge = GymBridge("CartPole-v1", success_threshold=3)
    bridge.reset(seed=0)
    for _ in range(3):
        bridge.step(np.zeros((1, 1), np.float32))
    assert bridge.result_slots()[0]["success"] is True


def test_env_instance_from_the_registry_is_rebuilt_from_its_spec() -> None:
    env = gym.make("Pendulum-v1", g=3.0)
    assert gym_target(env) == ("Pendulum-v1", {"g": 3.0})
    bridge = GymBridge(env)
    bridge.reset(seed=0)
    assert bridge.env is not env and bridge.env.unwrapped.g == 3.0
    with pytest.raises(TypeError, match="pass its factory function"):
        gym_target(make_succeed_at())  # built by hand: no registry spec


def test_contract_file_is_written_then_wins(tmp_path: Path) -> None:
    path = tmp_path / "contract.json"
    derived = GymBridge("Pendulum-v1", contract=path).ensure_contract()
    assert path.exists() and derived.features["observation/state"].names is None
    data = Contract.load(path).to_dict()
    data["features"]["observation/state"]["names"] = ["cos", "sin", "omega"]
    Contract.from_dict(data).save(path)
    loaded = GymBridge("Pendulum-v1", contract=path).ensure_contract()
    assert loaded.features["observation/state"].names == ("cos", "sin", "omega")


def test_factory_returning_wrong_number_of_copies_is_an_error() -> None:
    from pytest_hud.robot import BridgeError

    def make_vec() -> gym.vector.VectorEnv:
        return gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")

    with pytest.raises(BridgeError, match="built 2 env copies but num_envs=3"):
        GymBridge(make_vec, num_envs=3).reset(seed=0)
