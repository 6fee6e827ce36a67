"""Recording rollouts into a LeRobot v3 dataset: real rollouts of real envs (Pendulum,
PushT) read back through lerobot and PyAV, concurrency, errored episodes, bad inputs,
crash safety, appending, merging, and the Hub push (against a local fake)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from datasets_synthetic import CAMERA_CONTRACT, synthetic_episode
from needs import require, require_lerobot

from pytest_hud import LocalRuntime, Shared, Task, run
from pytest_hud.plumbing.loader import load_module
from pytest_hud.robot import BatchedAgent, Contract, Model, RobotAgent
from pytest_hud.robot.agent.adapter import LeRobotAdapter
from pytest_hud.robot.record.merge import merge_datasets
from pytest_hud.robot.record.schema import (
    MIN_VIDEO_HEIGHT,
    MIN_VIDEO_WIDTH,
    DatasetError,
    camera_key,
)
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


def read(root: Path) -> tuple[Any, dict[str, np.ndarray]]:
    """The dataset through lerobot, plus its frame columns straight from the parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("local/test", root=root)
    table = pa.concat_tables(pq.read_table(p) for p in sorted((root / "data").glob("*/*.parquet")))
    cols = {}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type):
            cols[name] = col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), -1)
        else:
            cols[name] = col.to_numpy(zero_copy_only=False)
    return ds, cols


def episode_rows(ds) -> list[dict]:
    return [
        {k: e[k] for k in ("episode_index", "length", "dataset_from_index", "dataset_to_index")}
        for e in ds.meta.episodes
    ]


def decode(mp4: Path) -> list[np.ndarray]:
    import av

    with av.open(str(mp4)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


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


# -- the schema --------------------------------------------------------------------------
def test_camera_key_rule() -> None:
    assert camera_key("pixels") == "pixels"
    assert camera_key("pixels/top") == "top"
    assert camera_key("observation/image") == "image"
    assert camera_key("observation.images.wrist") == "wrist"
    assert camera_key("agentview rgb") == "agentview_rgb"
    with pytest.raises(DatasetError, match="camera_keys"):
        camera_key("//")


def test_several_states_concatenate_in_contract_order(tmp_path: Path) -> None:
    writer = DatasetWriter(tmp_path / "multi")
    writer.check(CAMERA_CONTRACT)
    spaces = Contract.from_dict(CAMERA_CONTRACT).spaces()
    recorder = writer.observer(None, spaces)
    data = {
        "cam/top": np.full((32, 40, 3), 7, np.uint8),
        "arm": np.array([1.5, 2.5], np.float32),
        "gripper": np.array([0.25], np.float32),
    }
    for _ in range(3):
        recorder.step(data, np.array([0.1, 0.2, 0.3]))
    assert recorder.end(True)["dataset"]["frames"] == 3  # no loop running: committed now
    writer.finalize()
    ds, cols = read(tmp_path / "multi")
    state = ds.features["observation.state"]
    assert state["names"] == ["x", "y", "gripper_0"] and tuple(state["shape"]) == (3,)
    assert cols["observation.state"][0].tolist() == [1.5, 2.5, 0.25]
    assert ds.features["action"]["names"] == ["dx", "dy", "grip"]
    assert ds.meta.video_keys == ["observation.images.top"]
    assert decode(next((tmp_path / "multi" / "videos").rglob("*.mp4")))[0].shape == (32, 40, 3)


ENV_STATE_CONTRACT = {
    "control_rate": 80,
    "features": {
        "agent_pos": {"role": "observation", "shape": [2]},
        "observation/environment_state": {"role": "observation", "shape": [3]},
        "action": {"role": "action", "shape": [2]},
    },
}


def test_environment_state_gets_lerobots_own_key(tmp_path: Path) -> None:
    """ACT and Diffusion act without a camera only on observation.environment_state: an
    observation named environment_state lands there, in the dataset and in the adapter."""
    writer = DatasetWriter(tmp_path / "env_state")
    writer.check(ENV_STATE_CONTRACT)
    spaces = Contract.from_dict(ENV_STATE_CONTRACT).spaces()
    recorder = writer.observer(None, spaces)
    data = {
        "agent_pos": np.array([1.0, 2.0], np.float32),
        "observation/environment_state": np.array([3.0, 4.0, 5.0], np.float32),
    }
    for _ in range(3):
        recorder.step(data, np.array([0.5, -0.5]))
    recorder.end(True)
    writer.finalize()
    ds, cols = read(tmp_path / "env_state")
    assert tuple(ds.features["observation.state"]["shape"]) == (2,)
    assert tuple(ds.features["observation.environment_state"]["shape"]) == (3,)
    assert cols["observation.state"][2].tolist() == [1.0, 2.0]
    assert cols["observation.environment_state"][2].tolist() == [3.0, 4.0, 5.0]
    row = LeRobotAdapter().bind(spaces).observation(data, "reach")
    assert row["observation.state"].tolist() == [1.0, 2.0]
    assert row["observation.environment_state"].tolist() == [3.0, 4.0, 5.0]


def test_two_cameras_on_one_key_name_both(tmp_path: Path) -> None:
    contract = {
        "control_rate": 10,
        "features": {
            "left/rgb": {"role": "observation", "type": "rgb", "shape": [64, 64, 3]},
            "right/rgb": {"role": "observation", "type": "rgb", "shape": [64, 64, 3]},
            "action": {"role": "action", "shape": [2]},
        },
    }
    writer = DatasetWriter(tmp_path / "dup")
    with pytest.raises(DatasetError, match=r"'left/rgb' and 'right/rgb'.*observation\.images\.rgb"):
        writer.check(contract)
    with pytest.raises(DatasetError, match="'left/rgb' and 'right/rgb'"):
        writer.observer(None, Contract.from_dict(contract).spaces())
    fixed = DatasetWriter(tmp_path / "dup", camera_keys={"left/rgb": "left", "right/rgb": "right"})
    fixed.check(contract)


@pytest.mark.parametrize(
    ("height", "width", "ok"),
    [
        (8, 8, False),
        (16, 16, False),
        (64, 24, False),
        (3, 64, False),
        (32, 32, True),
        (64, 64, True),
        (MIN_VIDEO_HEIGHT, MIN_VIDEO_WIDTH, True),
    ],
)
def test_camera_too_small_for_the_encoder_is_refused_before_the_run(
    tmp_path: Path, height: int, width: int, ok: bool
) -> None:
    contract = {
        "control_rate": 10,
        "features": {
            "pixels/top": {"role": "observation", "type": "rgb", "shape": [height, width, 3]},
            "action": {"role": "action", "shape": [2]},
        },
    }
    writer = DatasetWriter(tmp_path / "small")
    if ok:
        writer.check(contract)
        return
    with pytest.raises(
        DatasetError, match=rf"camera 'pixels/top' is {width}x{height}.*video=False"
    ):
        writer.check(contract)
    DatasetWriter(tmp_path / "small", video=False).check(contract)  # images are fine


def test_camera_too_small_without_a_declared_shape_fails_at_the_first_tick(tmp_path: Path) -> None:
    contract = {
        "control_rate": 10,
        "features": {
            "cam": {"role": "observation", "type": "rgb"},
            "action": {"role": "action", "shape": [2]},
        },
    }
    writer = DatasetWriter(tmp_path / "late")
    writer.check(contract)
    recorder = writer.observer(None, Contract.from_dict(contract).spaces())
    with pytest.raises(DatasetError, match="camera 'cam' is 16x16"):
        recorder.step({"cam": np.zeros((16, 16, 3), np.uint8)}, np.zeros(2))


def test_the_destination_is_checked_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # RECORD_DIR, default ./data
    monkeypatch.chdir(tmp_path)
    assert DatasetWriter().root == tmp_path / "data"
    monkeypatch.setenv("RECORD_DIR", str(tmp_path / "from_env"))
    assert DatasetWriter().root == tmp_path / "from_env"
    # not writable: its parent is a file
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(DatasetError, match=r"a_file/data is not writable"):
        DatasetWriter(tmp_path / "a_file" / "data").check(CAMERA_CONTRACT)
    # an existing folder that is not a dataset
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_text("meow")
    with pytest.raises(DatasetError, match=r"not a LeRobot dataset.*--hud-record=OTHER_DIR"):
        DatasetWriter(tmp_path / "photos").check(CAMERA_CONTRACT)
    # no fps anywhere
    no_rate = {k: v for k, v in CAMERA_CONTRACT.items() if k != "control_rate"}
    with pytest.raises(DatasetError, match=r"no control_rate.*fps="):
        DatasetWriter(tmp_path / "x").check(no_rate)
    DatasetWriter(tmp_path / "x", fps=15).check(no_rate)
    with pytest.raises(DatasetError, match="integer fps"):
        DatasetWriter(tmp_path / "x").check(no_rate | {"control_rate": 12.5})


def test_existing_dataset_is_appended_to_or_refused(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    first = DatasetWriter(root)
    one = synthetic_episode(first, CAMERA_CONTRACT, 5, seed=1)
    first.finalize()
    second = DatasetWriter(root)
    second.check(CAMERA_CONTRACT)
    two = synthetic_episode(second, CAMERA_CONTRACT, 7, seed=2)
    assert two["dataset"]["episode_index"] == 1
    second.finalize()
    ds, cols = read(root)
    assert [r["length"] for r in episode_rows(ds)] == [5, 7]
    assert cols["action"][:5].tobytes() == one["actions"].tobytes()
    assert cols["action"][5:].tobytes() == two["actions"].tobytes()
    assert len(decode(root / ds.meta.get_video_file_path(1, "observation.images.top"))) == 7

    other = json.loads(json.dumps(CAMERA_CONTRACT))
    other["features"]["action"]["shape"] = [4]
    other["features"]["action"].pop("names")
    with pytest.raises(DatasetError, match=r"cannot append.*action.*--hud-record=OTHER_DIR"):
        DatasetWriter(root).check(other)
    with pytest.raises(DatasetError, match=r"fps.*--hud-record"):
        DatasetWriter(root, fps=20).check(CAMERA_CONTRACT)


CRASH = """
import os, signal, sys
import numpy as np
sys.path.insert(0, {tests!r})
from datasets_synthetic import CAMERA_CONTRACT, synthetic_episode
from pytest_hud.robot.record.writer import DatasetWriter
writer = DatasetWriter({root!r})
for seed in (1, 2):
    synthetic_episode(writer, CAMERA_CONTRACT, 6 + seed, seed)  # no loop: committed on return
    print("committed", seed, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no finalize, no atexit
"""


def test_committed_episodes_survive_a_killed_process(tmp_path: Path) -> None:
    root = tmp_path / "crashed"
    script = CRASH.format(tests=str(HERE), root=str(root))
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert proc.stdout.split() == ["committed", "1", "committed", "2"]
    ds, _ = read(root)
    assert ds.meta.total_episodes == 2 and [r["length"] for r in episode_rows(ds)] == [7, 8]
    for row in episode_rows(ds):
        mp4 = root / ds.meta.get_video_file_path(row["episode_index"], "observation.images.top")
        assert len(decode(mp4)) == row["length"]
    assert tuple(ds[10]["observation.images.top"].shape) == (3, 32, 40)
    # and recording resumes into it
    writer = DatasetWriter(root)
    assert synthetic_episode(writer, CAMERA_CONTRACT, 3, 9)["dataset"]["episode_index"] == 2
    writer.finalize()
    assert read(root)[0].meta.total_episodes == 3


def test_merge_keeps_part_order_and_order_permutes_parts(tmp_path: Path) -> None:
    a, b = DatasetWriter(tmp_path / "gw0"), DatasetWriter(tmp_path / "gw1")
    a_eps = [synthetic_episode(a, CAMERA_CONTRACT, n, seed=n) for n in (4, 5)]
    b_eps = [synthetic_episode(b, CAMERA_CONTRACT, 6, seed=6)]
    a.finalize()
    b.finalize()
    parts = [tmp_path / "gw0", tmp_path / "gw1", tmp_path / "gw2_never_recorded"]

    out = merge_datasets(parts, tmp_path / "merged")
    ds, cols = read(out)
    assert [r["length"] for r in episode_rows(ds)] == [4, 5, 6]
    assert (
        cols["action"].tobytes() == np.concatenate([e["actions"] for e in a_eps + b_eps]).tobytes()
    )
    key = "observation.images.top"
    assert sum(len(decode(p)) for p in (out / "videos" / key).rglob("*.mp4")) == 15
    assert tuple(ds[14][key].shape) == (3, 32, 40)

    out2 = merge_datasets(parts, tmp_path / "merged2", order=[1, 0, 2])
    ds2, cols2 = read(out2)
    assert [r["length"] for r in episode_rows(ds2)] == [6, 4, 5]
    assert cols2["action"][:6].tobytes() == b_eps[0]["actions"].tobytes()
    assert list(cols2["episode_index"]) == [0] * 6 + [1] * 4 + [2] * 5

    with pytest.raises(DatasetError, match="permutation"):
        merge_datasets(parts, tmp_path / "m3", order=[0, 0, 1])
    with pytest.raises(DatasetError, match="not empty"):
        merge_datasets(parts, out)
    other = DatasetWriter(tmp_path / "other", fps=20)
    synthetic_episode(other, CAMERA_CONTRACT, 3, seed=0)
    other.finalize()
    with pytest.raises(DatasetError, match="fps 10 vs 20"):
        merge_datasets([tmp_path / "gw0", tmp_path / "other"], tmp_path / "m4")


class FakeHfApi:
    """Stands in for huggingface_hub.HfApi inside lerobot: records the calls, no network."""

    calls: list[tuple[str, dict]] = []

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            FakeHfApi.calls.append((name, kwargs | {"args": args}))

        return call


def test_push_goes_through_the_hub_client_lerobot_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Hub is unreachable here, so the push runs against a local fake of the hub client
    calls lerobot's ``LeRobotDataset.push_to_hub`` makes (``HfApi.create_repo`` /
    ``upload_folder`` / ``create_tag`` and the dataset card's ``upload_file``)."""
    import huggingface_hub.repocard as repocard
    import lerobot.datasets.lerobot_dataset as lerobot_dataset

    FakeHfApi.calls = []
    cards: list[dict] = []
    monkeypatch.setattr(lerobot_dataset, "HfApi", FakeHfApi)
    monkeypatch.setattr(repocard, "upload_file", lambda **kw: cards.append(kw) or "url")
    monkeypatch.setattr(repocard.RepoCard, "validate", lambda self, repo_type=None: None)
    monkeypatch.setenv("HF_REPO", "someone/rollouts")
    monkeypatch.setenv("HF_TOKEN", "hf_fake")
    monkeypatch.setenv("HF_PRIVATE", "1")

    root = tmp_path / "pushed"
    writer = DatasetWriter(root)
    writer.check(CAMERA_CONTRACT)
    synthetic_episode(writer, CAMERA_CONTRACT, 4, seed=3)
    assert FakeHfApi.calls == []  # nothing leaves before finalize
    writer.finalize()
    writer.finalize()  # idempotent: one push
    names = [name for name, _ in FakeHfApi.calls]
    assert names.count("create_repo") == 1 and names.count("upload_folder") == 1
    create = dict(FakeHfApi.calls)["create_repo"]
    assert create["repo_id"] == "someone/rollouts" and create["private"] is True
    assert create["repo_type"] == "dataset"
    upload = dict(FakeHfApi.calls)["upload_folder"]
    assert Path(upload["folder_path"]) == root and upload["repo_id"] == "someone/rollouts"
    assert dict(FakeHfApi.calls)["create_tag"]["tag"] == "v3.0"
    assert cards and cards[0]["repo_id"] == "someone/rollouts"
    assert read(root)[0].meta.total_episodes == 1

    # a push target without a token is refused before the run
    import huggingface_hub.constants as constants

    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no_token"))
    with pytest.raises(DatasetError, match="HF_TOKEN"):
        DatasetWriter(tmp_path / "nope").check(CAMERA_CONTRACT)
