"""The agent stack without torch: chunk queue, ensembling, batching, registry, faults."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from pytest_hud import Shared, Task, run
from pytest_hud.robot import (
    AgentSpecError,
    BatchedAgent,
    BatchedModel,
    Ensembler,
    LeRobotAdapter,
    Model,
    OpenPIAdapter,
    RandomModel,
    RobotAgent,
    load_agent,
)
from pytest_hud.robot.agent.adapter import AdapterError
from pytest_hud.robot.agent.registry import available_agents
from pytest_hud.robot.contract import Contract
from pytest_hud.runtime import LocalRuntime

HERE = Path(__file__).resolve().parents[1] / "helpers"
COUNTER = HERE / "envs" / "counter_env.py"


class Recorder(Model):
    """Chunks whose values say which inference and which chunk index produced them."""

    def __init__(self, horizon: int = 4, size: int = 2) -> None:
        self.horizon = horizon
        self.size = size
        self.calls: list[int] = []  # batch width of every forward
        self.rows: list[dict] = []

    def infer(self, batch):
        n = len(batch["prompt"])
        self.calls.append(n)
        state = np.asarray(batch["observation/state"])[:, 0]  # the counter's count
        out = np.zeros((n, self.horizon, self.size), np.float32)
        out[:, :, 0] = 1.0
        out[:, :, 1] = state[:, None] * 100 + np.arange(self.horizon)
        return out


async def rollouts(agent, n: int = 1, **kw):
    """n concurrent rollouts on one vectorized counter sim (4 slots, lockstep)."""
    tasks = [Task("counter", "count", {"seed": s}) for s in range(n)]
    return await run(tasks, agent, Shared(LocalRuntime(COUNTER), width=4), max_concurrent=n, **kw)


@pytest.mark.anyio
async def test_open_loop_chunk_queue() -> None:
    model = Recorder(horizon=4)
    agent = RobotAgent(model)
    [res] = await rollouts(agent)
    assert res.error is None and res.steps == 3  # the counter's episodes last 3 ticks
    assert res.agent_info["inferences"] == 1  # one 4-chunk covers 3 ticks
    agent.chunk_size = 1
    [res] = await rollouts(agent)
    assert res.agent_info["inferences"] == 3
    assert res.grade["total_reward"] == 3.0  # first action element 1.0 each tick


@pytest.mark.anyio
async def test_max_steps_stops_the_agent() -> None:
    [res] = await rollouts(RobotAgent(Recorder(), max_steps=2))
    assert res.error is None and res.agent_info["steps"] == 2
    assert res.agent_info["truncated_by_agent"] is True


@pytest.mark.anyio
async def test_wrong_output_rank_or_size_names_expected_and_got() -> None:
    class WrongSize(Model):
        def infer(self, batch):
            return np.zeros((1, 3, 5), np.float32)

    class WrongRank(Model):
        def infer(self, batch):
            return np.zeros(5, np.float32)

    [res] = await rollouts(RobotAgent(WrongSize()))
    assert res.error_type == "ModelOutputError" and res.phase == "agent"
    assert "actions of size 5; the env's contract declares an action of size 2" in res.error
    [res] = await rollouts(RobotAgent(WrongRank()))
    assert "returned shape (5,); expected [N, T, A] = [1, T, A]" in res.error


def test_ensembler_modes() -> None:
    c0 = np.array([[0.0], [1.0], [2.0]], np.float32)  # predicted at tick 0 for ticks 0..2
    c1 = np.array([[10.0], [11.0], [12.0]], np.float32)  # predicted at tick 1 for ticks 1..3
    for mode, expected in [("newest", 10.0), ("average", 5.5)]:
        e = Ensembler(mode)
        e.update(c0)
        assert e.next()[0] == 0.0
        e.update(c1)
        assert e.next()[0] == pytest.approx(expected)
    e = Ensembler("temporal", k=0.5)
    e.update(c0)
    e.next()
    e.update(c1)
    w = np.exp(-0.5 * np.arange(2))
    assert e.next()[0] == pytest.approx((1.0 * w[0] + 10.0 * w[1]) / w.sum())
    e = Ensembler("temporal", query_every=3)
    assert e.wants_chunk
    e.update(c0)
    e.next()
    assert not e.wants_chunk
    with pytest.raises(ValueError, match="unknown ensembling mode"):
        Ensembler("median")


@pytest.mark.anyio
async def test_agent_with_an_ensembler_infers_every_tick() -> None:
    model = Recorder(horizon=4)
    [res] = await rollouts(RobotAgent(model, ensembler=Ensembler("temporal")))
    assert res.error is None and res.agent_info["inferences"] == res.steps == 3


@pytest.mark.anyio
async def test_batched_agent_coalesces_concurrent_rollouts() -> None:
    model = Recorder(horizon=1)
    agent = BatchedAgent(RobotAgent(model), max_wait_s=5.0)
    results = await rollouts(agent, n=4)
    assert [r.error for r in results] == [None] * 4
    # the lockstep sim keeps the four in step: once all four are connected, every tick's
    # rows go through one forward (the first tick catches rollouts as they connect)
    assert sum(model.calls) == 12 and model.calls[-2:] == [4, 4]
    assert agent.batched.batches == model.calls


@pytest.mark.anyio
async def test_batched_model_caps_width_and_a_failing_row_fails_only_its_caller() -> None:
    class FailOnTwo(Model):
        def __init__(self) -> None:
            self.widths: list[int] = []

        def infer(self, batch):
            x = np.asarray(batch["x"])
            self.widths.append(len(x))
            if 2 in x.tolist():
                raise RuntimeError("bad batch")
            return np.repeat(x[:, None, None].astype(np.float32), 1, axis=1)

    inner = FailOnTwo()
    model = BatchedModel(inner, max_wait_s=0.01, batch_size=2)
    model.live = 4
    results = await asyncio.gather(
        *(model.ainfer({"x": np.float32(i)}) for i in range(4)), return_exceptions=True
    )
    # the failed forward [2, 3] is rerun row by row: only row 2 fails (issue 12 #9)
    assert inner.widths == [2, 2, 1, 1]
    assert [float(r[0, 0]) for r in results[:2]] == [0.0, 1.0]
    assert isinstance(results[2], RuntimeError)
    assert float(results[3][0, 0]) == 3.0


@pytest.mark.anyio
async def test_batched_model_stacks_only_rows_of_one_layout() -> None:
    class Sum(Model):
        def __init__(self) -> None:
            self.layouts: list[tuple[int, ...]] = []

        def infer(self, batch):
            state = np.asarray(batch["state"])  # stacking mixed shapes would fail here
            self.layouts.append(state.shape)
            return state.sum(axis=1)[:, None, None].astype(np.float32)

    inner = Sum()
    model = BatchedModel(inner, max_wait_s=0.01)
    model.live = 5  # rollouts on two envs: states of size 2 and of size 3, interleaved
    sizes = [2, 3, 2, 3, 2]
    results = await asyncio.gather(
        *(model.ainfer({"state": np.full(n, i, np.float32)}) for i, n in enumerate(sizes))
    )
    assert [float(r[0, 0]) for r in results] == [i * n for i, n in enumerate(sizes)]
    assert inner.layouts == [(3, 2), (2, 3)]  # the oldest row's layout goes first


def test_registry_builtins_and_unknown_names(tmp_path: Path) -> None:
    assert isinstance(load_agent("zero"), RobotAgent)
    agent = load_agent("random:3")
    assert isinstance(agent.model, RandomModel) and agent.name == "random:3"
    with pytest.raises(AgentSpecError, match=r"unknown agent 'gpt'.*zero.*random.*lerobot:PATH"):
        load_agent("gpt")
    with pytest.raises(AgentSpecError, match="openpi: needs HOST:PORT"):
        load_agent("openpi:nohost")
    factory = tmp_path / "my_agents.py"
    factory.write_text(
        "from pytest_hud.robot import RobotAgent, ZeroModel\n"
        "def make():\n    return RobotAgent(ZeroModel())\n"
        "async def plain(run):\n    return {}\n"
    )
    made = load_agent(f"{factory}:make")
    assert isinstance(made, RobotAgent) and made.name.endswith("my_agents.py:make")
    assert load_agent(f"{factory}:plain").__name__ == "plain"
    with pytest.raises(AgentSpecError, match="cannot load agent"):
        load_agent(f"{factory}:missing")


def test_registered_agents_are_read_once_per_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry reads the installed entry points once (a scan reads every distribution's
    metadata), yet a distribution that appears on sys.path later is found, as pip's would
    be in a new process."""
    from importlib import metadata

    scans: list[str] = []
    real = metadata.entry_points
    monkeypatch.setattr(
        metadata, "entry_points", lambda **kw: (scans.append(kw["group"]), real(**kw))[1]
    )
    monkeypatch.syspath_prepend(str(tmp_path / "empty"))  # a sys.path no earlier test cached
    for _ in range(3):
        assert "probe-zero" not in available_agents()
    assert scans == ["pytest_hud.agents"]
    dist = tmp_path / "probe_agents-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-agents\n")
    (dist / "entry_points.txt").write_text("[pytest_hud.agents]\nprobe-zero = probe_agents:make\n")
    (tmp_path / "probe_agents.py").write_text(
        "from pytest_hud.robot import RobotAgent, ZeroModel\n"
        "def make():\n    return RobotAgent(ZeroModel())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "probe-zero" in available_agents()
    assert isinstance(load_agent("probe-zero"), RobotAgent)
    assert scans == ["pytest_hud.agents"] * 2


def test_adapters_map_by_contract() -> None:
    contract = Contract.from_dict(
        {
            "features": {
                "wrist": {"role": "observation", "type": "rgb"},
                "front": {"role": "observation", "type": "rgb"},
                "joints": {"role": "observation"},
                "gripper": {"role": "observation"},
                "action": {"role": "action", "shape": [7]},
            }
        }
    )
    spaces = contract.spaces()
    data = {
        "wrist": np.full((4, 4, 3), 255, np.uint8),
        "front": np.zeros((4, 4, 3), np.uint8),
        "joints": np.ones(6, np.float64),
        "gripper": np.array([0.5]),
    }
    adapter = LeRobotAdapter(["observation.images.a", "observation.images.b"]).bind(spaces)
    row = adapter.observation(data, "stack the cubes")
    assert (
        row["observation.images.a"].shape == (3, 4, 4) and row["observation.images.a"].max() == 1.0
    )
    assert row["observation.images.b"].max() == 0.0  # cameras in contract order
    assert row["observation.state"].dtype == np.float32 and row["observation.state"].shape == (7,)
    assert row["task"] == "stack the cubes"
    with pytest.raises(
        AdapterError, match=r"expects 1 camera\(s\) \['img'\].*has 2 \['wrist', 'front'\]"
    ):
        LeRobotAdapter(["img"]).bind(spaces)
    # a state-only policy gets the state and no camera (an env may send one for the report)
    row = LeRobotAdapter([]).bind(spaces).observation(data, "p")
    assert set(row) == {"observation.state", "task"}
    row = OpenPIAdapter({"wrist": "observation/wrist_image"}).bind(spaces).observation(data, "p")
    assert set(row) == {"observation/wrist_image", "front", "joints", "gripper", "prompt"}
    assert row["joints"].dtype == np.float32 and row["front"].dtype == np.uint8


@pytest.mark.anyio
async def test_batched_agent_reports_how_busy_the_policy_was() -> None:
    class Slow(Recorder):
        """A fake-slow model (the real one is torch); measures its own forwards."""

        def __init__(self) -> None:
            super().__init__(horizon=1)
            self.own_s = 0.0

        def infer(self, batch):
            import time

            start = time.monotonic()
            time.sleep(0.02)
            out = super().infer(batch)
            self.own_s += time.monotonic() - start
            return out

    model = Slow()
    agent = BatchedAgent(RobotAgent(model), max_wait_s=5.0)
    results = await rollouts(agent, n=3)
    assert [r.error for r in results] == [None] * 3
    busy = [r.agent_info["policy_busy"] for r in results]
    whole = agent.batched.busy()
    # bounds, not timings: the accounting covers every forward and never exceeds the span
    assert 0.0 < whole["fraction"] <= 1.0
    assert model.own_s <= whole["busy_s"] <= whole["span_s"]
    assert all(0.0 < b["episode"] <= 1.0 and b["busy_s"] <= b["span_s"] for b in busy)
    assert max(b["busy_s"] for b in busy) <= round(whole["busy_s"], 3)  # rows round to ms
    assert results[0].report_fields()["policy_busy"] == busy[0]
