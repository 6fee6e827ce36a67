"""Recording rollouts into a LeRobot v3 dataset: real rollouts of real envs (Pendulum,
PushT) read back through lerobot and PyAV, concurrency and errored episodes. The dataset's
files (schema, appending, crash safety, merging, the Hub push): test_dataset_files.py."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from datasets_synthetic import CAMERA_CONTRACT, decode, episode_rows, read
from needs import require, require_lerobot

from pytest_hud import LocalRuntime, Shared, Task, run
from pytest_hud.plumbing.loader import load_module
from pytest_hud.robot import BatchedAgent, Contract, Model, RobotAgent
from pytest_hud.robot.record.writer import DatasetWriter

pytestmark = pytest.mark.lerobot_version

HERE = Path(__file__).resolve().parents[1] / "helpers"
RECORD_ENV = HERE / "envs" / "record_env.py"
PUSHT_ENV = HERE / "envs" / "pusht_env.py"
STEPS = 20


@pytest.fixture(autouse=True)
def _lerobot() -> None:
    require_lerobot()


# -- helpers -----------------------------------------------------------------------------
class NoisyModel(Model):
    """float64 chunks of 4 from the action bounds: what reaches the wire is their float32."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def bind(self, spaces) -> None:
        stats = spaces.action_feature.stats or {}
        size = spaces.action_feature.size or 1
        self.low = np.asarray(stats.get("min", [-1.0] * size), np.float64)
        self.high = np.asarray(stats.get("max", [1.0] * size), np.float64)

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        n = len(next(iter(batch.values())))
        return self.rng.uniform(self.low, self.high, (n, 4, len(self.low)))


class Capture:
    """An observer factory keeping what each episode executed, and the global tick order."""

    def __init__(self) -> None:
        self.episodes: dict[int, dict[str, list]] = {}
        self.order: list[int] = []
        self._ids = itertools.count()

    def __call__(self, run, spaces) -> Any:
        capture, key = self, next(self._ids)
        record = self.episodes[key] = {"actions": [], "data": [], "outcomes": []}

        class Observer:
            def step(self, data: dict, action: np.ndarray) -> None:
                record["data"].append({k: np.array(v) for k, v in data.items()})
                record["actions"].append(np.array(action))
                capture.order.append(key)

            def outcome(self, reward: float | None, terminated: bool) -> None:
                record["outcomes"].append((reward, terminated))

            def end(self, ok: bool) -> dict:
                return {"capture": key}

        return Observer()


def recording_agent(writer: DatasetWriter, capture: Capture, seed: int = 0) -> RobotAgent:
    agent = RobotAgent(NoisyModel(seed), max_steps=STEPS)
    agent.observers += [writer.observer, capture]
    return agent


def check_episode(cols, row: dict, record: dict, state_key: str) -> None:
    """The episode's frames are contiguous and equal what that rollout executed."""
    lo, hi = row["dataset_from_index"], row["dataset_to_index"]
    assert (cols["episode_index"][lo:hi] == row["episode_index"]).all()
    assert (cols["frame_index"][lo:hi] == np.arange(hi - lo)).all()
    executed = np.stack(record["actions"]).astype(np.float32)  # what went on the wire
    recorded = cols["action"][lo:hi].reshape(hi - lo, -1)
    assert recorded.dtype == np.float32
    assert recorded.tobytes() == executed.tobytes()  # bit for bit
    states = np.stack([d[state_key] for d in record["data"]]).reshape(hi - lo, -1)
    assert cols["observation.state"][lo:hi].reshape(hi - lo, -1).tobytes() == states.tobytes()


def by_capture(results) -> dict[int, dict]:
    """episode_index -> capture key, from the rollouts' agent reports."""
    assert [r.error for r in results] == [None] * len(results), [r.error for r in results]
    return {r.agent_info["dataset"]["episode_index"]: r.agent_info["capture"] for r in results}


def pendulums(n: int):
    def build(task: Task):
        return load_module(RECORD_ENV, fresh=True).build(num_envs=n)

    return Shared(LocalRuntime(build), width=n)


# -- real rollouts -----------------------------------------------------------------------
@pytest.mark.anyio
async def test_pendulum_rollouts_read_back_bit_for_bit(tmp_path: Path) -> None:
    root = tmp_path / "pendulum"
    writer, capture = DatasetWriter(root), Capture()
    tasks = [Task("pendulum_rec", "swing", {"seed": s}) for s in range(3)]
    results = await run(tasks, recording_agent(writer, capture), pendulums(1), max_concurrent=1)
    episodes = by_capture(results)
    assert sorted(episodes) == [0, 1, 2]
    assert all(
        r.agent_info["dataset"] == {"root": str(root), "episode_index": i, "frames": STEPS}
        for i, r in enumerate(results)
    )
    assert await writer.afinalize() == root
    assert writer.finalize() == root  # idempotent

    ds, cols = read(root)
    assert ds.meta.total_episodes == 3 and ds.num_frames == 3 * STEPS
    assert ds.fps == 30 and ds.meta.robot_type == "pendulum"
    feats = ds.features
    assert feats["observation.state"]["names"] == ["cos_theta", "sin_theta", "theta_dot"]
    assert tuple(feats["observation.state"]["shape"]) == (3,)
    assert feats["action"]["names"] == ["torque"] and tuple(feats["action"]["shape"]) == (1,)
    assert not ds.meta.video_keys
    assert list(ds.meta.tasks.index) == ["Swing the pendulum up."]
    rows = episode_rows(ds)
    assert [r["length"] for r in rows] == [STEPS] * 3
    for row in rows:
        check_episode(
            cols, row, capture.episodes[episodes[row["episode_index"]]], "observation/state"
        )
    item = ds[STEPS + 3]  # lerobot's own reader
    assert item["episode_index"].item() == 1 and item["task"] == "Swing the pendulum up."
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["data_files_size_in_mb"] == 100  # lerobot's default restored by finalize


@pytest.mark.anyio
async def test_frames_carry_the_envs_answer_and_episodes_their_grade(tmp_path: Path) -> None:
    """next.reward / next.done per frame are what the env answered to that frame's action
    (lerobot's names); an ungraded episode's metadata sums them, a graded one's holds its
    grade, and only its last frame carries next.success."""
    root = tmp_path / "pendulum"
    writer, capture = DatasetWriter(root), Capture()
    results = await run(
        [Task("pendulum_rec", "swing", {"seed": 0})],
        recording_agent(writer, capture),
        pendulums(1),
        max_concurrent=1,
    )
    record = capture.episodes[by_capture(results)[0]]
    writer.finalize()
    ds, cols = read(root)
    rewards = np.array([r for r, _ in record["outcomes"]], np.float32)
    assert len(rewards) == STEPS and rewards.std() > 0  # pendulum rewards vary per step
    assert cols["next.reward"].reshape(-1).tobytes() == rewards.tobytes()
    assert cols["next.done"].reshape(-1).tolist() == [t for _, t in record["outcomes"]]
    assert not cols["next.success"].any()
    episode = ds.meta.episodes[0]
    assert episode["grade/success"] is False and math.isnan(episode["grade/score"])
    assert episode["grade/steps"] == STEPS
    assert episode["grade/total_reward"] == pytest.approx(float(rewards.sum()), rel=1e-5)

    graded = DatasetWriter(tmp_path / "graded", graded=True)
    for index, success in enumerate((True, False)):
        spaces = Contract.from_dict(CAMERA_CONTRACT).spaces()
        graded.check(CAMERA_CONTRACT)
        recorder = graded.observer(None, spaces)
        for step in range(4):
            data = {
                "cam/top": np.zeros((32, 40, 3), np.uint8),
                "arm": np.zeros(2, np.float32),
                "gripper": np.zeros(1, np.float32),
            }
            recorder.step(data, np.zeros(3))
            recorder.outcome(0.5, step == 3)
        assert recorder.end(True)["dataset"]["episode_index"] == index
        graded.grade(index, {"success": success, "score": 0.75, "steps": 4, "total_reward": 2.0})
    graded.finalize()
    ds, cols = read(tmp_path / "graded")
    assert cols["next.done"].reshape(-1).tolist() == [False, False, False, True] * 2
    assert cols["next.success"].reshape(-1).tolist() == [False] * 3 + [True] + [False] * 4
    rows = [
        {k: e[k] for k in ("grade/success", "grade/score", "grade/steps", "grade/total_reward")}
        for e in ds.meta.episodes
    ]
    assert rows == [
        {"grade/success": s, "grade/score": 0.75, "grade/steps": 4, "grade/total_reward": 2.0}
        for s in (True, False)
    ]


@pytest.mark.anyio
async def test_pusht_images_become_decodable_videos(tmp_path: Path) -> None:
    require(importlib.util.find_spec("gym_pusht"), "gym-pusht", "pip install gym-pusht")
    root = tmp_path / "pusht"
    writer, capture = DatasetWriter(root), Capture()

    def pusht2(task: Task):
        return load_module(PUSHT_ENV, fresh=True).build(num_envs=2)

    tasks = [Task("pusht", "push", {"seed": s}) for s in range(2)]
    agent = recording_agent(writer, capture)
    results = await run(tasks, agent, Shared(LocalRuntime(pusht2), width=2), max_concurrent=2)
    episodes = by_capture(results)
    writer.finalize()

    ds, cols = read(root)
    key = "observation.images.pixels"
    assert ds.meta.total_episodes == 2 and ds.fps == 10 and ds.meta.video_keys == [key]
    assert tuple(ds.features[key]["shape"]) == (96, 96, 3)
    assert ds.features[key]["names"] == ["height", "width", "channels"]
    assert ds.features[key]["info"]["video.codec"] == "av1"
    assert tuple(ds.features["observation.state"]["shape"]) == (2,)
    for row in episode_rows(ds):
        record = capture.episodes[episodes[row["episode_index"]]]
        check_episode(cols, row, record, "agent_pos")
        ep = ds.meta.episodes[row["episode_index"]]
        mp4 = root / ds.meta.get_video_file_path(row["episode_index"], key)
        frames = decode(mp4)
        start = round(ep[f"videos/{key}/from_timestamp"] * ds.fps)
        frames = frames[start : start + row["length"]]
        assert len(frames) == STEPS and all(f.shape == (96, 96, 3) for f in frames)
        sent = np.stack([d["pixels"] for d in record["data"]]).astype(np.float64)
        error = np.abs(np.stack(frames).astype(np.float64) - sent).mean()
        assert error < 8.0, error  # lossy AV1, but the same pictures
    item = ds[STEPS + 5]
    assert tuple(item[key].shape) == (3, 96, 96)  # lerobot decodes it too (PyAV backend)


@pytest.mark.anyio
async def test_concurrent_batched_episodes_do_not_interleave(tmp_path: Path) -> None:
    root = tmp_path / "batched"
    writer, capture = DatasetWriter(root), Capture()
    agent = BatchedAgent(recording_agent(writer, capture), max_wait_s=1.0)
    tasks = [Task("pendulum_rec", "swing", {"seed": s}) for s in range(4)]
    results = await run(tasks, agent, pendulums(4), max_concurrent=4)
    episodes = by_capture(results)
    assert max(agent.batched.batches) > 1  # real concurrent rollouts...
    first_switch = next(i for i, k in enumerate(capture.order) if k != capture.order[0])
    assert first_switch < STEPS  # ...whose ticks interleaved in time
    writer.finalize()
    ds, cols = read(root)
    rows = episode_rows(ds)
    assert [r["length"] for r in rows] == [STEPS] * 4
    assert [r["dataset_from_index"] for r in rows] == [0, STEPS, 2 * STEPS, 3 * STEPS]
    for row in rows:
        check_episode(
            cols, row, capture.episodes[episodes[row["episode_index"]]], "observation/state"
        )


class FailingModel(NoisyModel):
    """Raises on its ``fail_at``-th inference (counted over all episodes)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(0)
        self.calls = 0
        self.fail_at = fail_at

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("policy exploded")
        return super().infer(batch)


@pytest.mark.anyio
async def test_errored_episode_is_not_committed(tmp_path: Path) -> None:
    root = tmp_path / "errored"
    writer, capture = DatasetWriter(root), Capture()
    agent = RobotAgent(FailingModel(fail_at=STEPS // 4 + 3), max_steps=STEPS)  # mid-episode 2
    agent.observers += [writer.observer, capture]
    tasks = [Task("pendulum_rec", "swing", {"seed": s}) for s in range(3)]
    results = await run(tasks, agent, pendulums(1), max_concurrent=1)
    assert [r.error is None for r in results] == [True, False, True]
    assert "policy exploded" in (results[1].error or "")
    assert len(capture.episodes[1]["actions"]) > 0  # it did record ticks before failing
    assert [r.agent_info["dataset"]["episode_index"] for r in (results[0], results[2])] == [0, 1]
    writer.finalize()
    ds, cols = read(root)
    assert ds.meta.total_episodes == 2 and ds.num_frames == 2 * STEPS
    for row, key in zip(episode_rows(ds), (0, 2), strict=True):
        check_episode(cols, row, capture.episodes[key], "observation/state")

    # the observer's own answer for an errored episode
    other = DatasetWriter(tmp_path / "unused", fps=10)
    recorder = other.observer(None, Contract.from_dict(CAMERA_CONTRACT).spaces())
    recorder.step(
        {"cam/top": np.zeros((32, 40, 3), np.uint8), "arm": np.zeros(2), "gripper": np.zeros(1)},
        np.zeros(3),
    )
    assert recorder.end(False) == {
        "dataset": {
            "root": str(tmp_path / "unused"),
            "episode_index": None,
            "discarded": "the episode errored",
        }
    }
    assert other.finalize() is None and not (tmp_path / "unused").exists()
