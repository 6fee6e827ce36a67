"""A disk that fills up while recording (issue 26 #4): a real tmpfs, filled to a few
hundred KB free, under ``--hud-record`` and the episode videos (GIFs).

What must hold: one error naming the folder and what was kept (not an ERROR per rollout:
the rollouts keep their outcomes); every episode already finalized reads back whole with
lerobot's ``LeRobotDataset`` (the failed episode's partial files are gone); rows point only
at episodes that are there; no partial GIF is left; and once there is space a later run
into the same folder appends and works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from datasets_synthetic import CAMERA_CONTRACT, synthetic_episode
from needs import require_lerobot
from paths import ROOT
from small_disk import fill, free_bytes, mounted

#: the disk's size, and what the filler leaves free: room for a few episodes
SIZE, LEAVE = "4m", 350_000


@pytest.fixture
def disk(tmp_path: Path) -> Any:
    with mounted(tmp_path / "disk", SIZE) as where:
        yield where


def read_back(root: Path) -> Any:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset("local/full", root=root)


def actions_of(ds: Any, episode: int) -> np.ndarray:
    rows = [ds.hf_dataset[i] for i in range(len(ds.hf_dataset))]
    got = [np.asarray(r["action"], np.float32) for r in rows if int(r["episode_index"]) == episode]
    return np.stack(got)


@pytest.mark.lerobot_version
def test_a_dataset_whose_disk_fills_keeps_its_finalized_episodes(disk: Path) -> None:
    require_lerobot()
    from pytest_hud.errors import DatasetError
    from pytest_hud.robot.record.writer import DatasetWriter

    root = disk / "ds"
    filler = fill(disk, leave=LEAVE)
    writer = DatasetWriter(root)
    ends = [synthetic_episode(writer, CAMERA_CONTRACT, 20, seed) for seed in range(10)]
    indices = [e["dataset"]["episode_index"] for e in ends]
    failed = indices.index(None) - 1  # the episode whose commit met the full disk
    assert 0 < failed < 9, indices
    assert indices == [*range(failed + 1), *[None] * (9 - failed)]
    assert all("the disk holding" in e["dataset"]["discarded"] for e in ends[failed + 1 :])
    with pytest.raises(DatasetError) as caught:
        writer.finalize()
    text = str(caught.value)
    assert f"recording into {root} stopped: the disk is full" in text
    assert f"kept: the dataset's {failed} committed episode(s), whole" in text
    assert f"not recorded: episode {failed} and {9 - failed} later one(s)" in text

    ds = read_back(root)  # every finalized episode, whole, and nothing of the failed one
    assert ds.meta.total_episodes == failed and len(ds) == 20 * failed
    for i in range(failed):
        assert actions_of(ds, i).tobytes() == ends[i]["actions"].tobytes()
    assert len(list((root / "data").rglob("*.parquet"))) == failed
    assert len(list((root / "videos").rglob("*.mp4"))) == failed
    assert not [p for p in (root / "images").rglob("*") if p.is_file()]  # no frame left

    filler.unlink()  # space again: a later writer appends to the same dataset
    later = DatasetWriter(root)
    more = [synthetic_episode(later, CAMERA_CONTRACT, 20, 100 + s) for s in range(2)]
    assert [m["dataset"]["episode_index"] for m in more] == [failed, failed + 1]
    assert later.finalize() == root
    ds = read_back(root)
    assert ds.meta.total_episodes == failed + 2
    assert actions_of(ds, failed + 1).tobytes() == more[1]["actions"].tobytes()
    assert actions_of(ds, 0).tobytes() == ends[0]["actions"].tobytes()


def test_a_video_that_cannot_be_written_leaves_no_partial_file(disk: Path) -> None:
    from pytest_hud._plugin.video import VideoObserver, write_failures

    fill(disk, leave=0)
    folder = disk / "videos"
    observer = VideoObserver(folder / "ep.gif", "cam", fps=10)
    rng = np.random.default_rng(0)
    for _ in range(30):
        observer.step({"cam": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)}, np.zeros(1))
    assert observer.end(True) == {}  # no video, and the rollout's result stands
    assert not (folder / "ep.gif").exists()
    [failure] = write_failures(folder)
    assert failure.startswith("ep.gif: ") and "No space left on device" in failure
    assert write_failures(folder) == []


CAMERA_ENV = '''
import numpy as np
from pytest_hud import Environment
from pytest_hud.robot import RobotBridge, RobotEndpoint


class Camera(RobotBridge):
    """A 32x40 camera of noise and a 2-d position the actions move; success: x > 0."""

    contract = {"control_rate": 10, "features": {
        "observation/images/top": {"role": "observation", "type": "rgb", "shape": [32, 40, 3]},
        "observation/state": {"role": "observation", "shape": [2]},
        "action": {"role": "action", "shape": [2], "stats": {"min": [-1, -1], "max": [1, 1]}}}}

    def reset(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.pos = np.zeros(2, np.float32)
        self.t = 0
        return "look around"

    def step(self, actions):
        self.pos += np.asarray(actions[0], np.float32)
        self.t += 1

    def get_observation(self):
        image = self.rng.integers(0, 256, (1, 32, 40, 3), dtype=np.uint8)
        return {"observation/images/top": image, "observation/state": self.pos[None].copy()}, (
            np.array([self.t >= 15]))

    def result(self):
        ok = bool(self.pos[0] > 0)
        return {"score": float(ok), "success": ok, "total_reward": float(self.pos[0])}


env = Environment("camera")
sim = RobotEndpoint(Camera)
env.add_capability(sim)


@env.template()
async def look(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
'''

TEST_FILE = """
import pytest
from camera_env import look

@pytest.mark.hud(tasks=[look.task(seed=s) for s in range(ROWS)], min_success=0.0)
def test_look(hud_result):
    assert hud_result.error is None, hud_result.error
"""


def session(
    where: Path, out: Path, rows: int, *args: str
) -> tuple[subprocess.CompletedProcess, dict]:
    """A pytest session in ``where`` (its .hud videos and the dataset land there; the
    results document in ``out``, off the full disk)."""
    (where / "camera_env.py").write_text(CAMERA_ENV)
    (where / "conftest.py").write_text(
        "import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).parent))\n"
    )
    (where / "test_look.py").write_text(TEST_FILE.replace("ROWS", str(rows)))
    results = out / f"results-{len(list(out.glob('results-*')))}.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_look.py", "-q", "-p", "no:cacheprovider",
         "--hud-agent=random:0", f"--hud-results={results}", *args],
        cwd=where, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    return proc, json.loads(results.read_text())


def check_rows_point_at_whole_episodes(doc: dict) -> list[dict]:
    """Every row is graded (not an ERROR); those with an episode index find it in the
    dataset they name; the others say why they were not recorded."""
    rows = doc["rollouts"]
    assert [r["error"] for r in rows] == [None] * len(rows)
    assert {r["outcome"] for r in rows} <= {"passed", "failed"}
    recorded = [r for r in rows if r["dataset"]["episode_index"] is not None]
    for r in rows:
        if r["dataset"]["episode_index"] is None:
            assert r["dataset"]["discarded"].startswith("not recorded"), r["dataset"]
    datasets: dict[str, Any] = {}
    for r in recorded:
        root = r["dataset"]["root"]
        ds = datasets.setdefault(root, read_back(Path(root)))
        assert r["dataset"]["episode_index"] < ds.meta.total_episodes, (r, root)
    return recorded


@pytest.mark.lerobot_version
def test_a_session_whose_disk_fills_fails_once_keeps_its_episodes_and_appends_later(
    disk: Path, tmp_path: Path
) -> None:
    """One process: the dataset stops at its last whole episode, the GIFs that do not fit
    are dropped, the session fails once per artifact naming the folder (exit 1, every
    rollout graded), and once there is space the same --hud-record folder appends."""
    require_lerobot()
    where = disk / "run"
    where.mkdir()
    filler = fill(disk, leave=LEAVE)
    proc, doc = session(where, tmp_path, 10, "--hud-record=ds", "-p", "no:xdist")
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "INTERNALERROR" not in text
    root = where / "ds"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED recording failed")]
    assert len(lines) == 1 and f"recording into {root} stopped: the disk is full" in lines[0]
    videos = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED hud videos")]
    assert len(videos) <= 1 and all(str(where / ".hud" / "videos") in v for v in videos)
    recorded = check_rows_point_at_whole_episodes(doc)
    kept = read_back(root).meta.total_episodes
    assert 0 < kept == len(recorded) < 10
    for r in doc["rollouts"]:  # a GIF is whole or absent
        assert r["video"] is None or Path(r["video"]).stat().st_size > 0

    filler.unlink()
    assert free_bytes(disk) > 1 << 20
    again, doc = session(where, tmp_path, 2, "--hud-record=ds", "-p", "no:xdist")
    assert again.returncode == 0, again.stdout + again.stderr
    assert read_back(root).meta.total_episodes == kept + 2
    check_rows_point_at_whole_episodes(doc)


@pytest.mark.lerobot_version
def test_under_xdist_each_worker_says_once_what_it_kept(disk: Path, tmp_path: Path) -> None:
    """Two workers record their parts on the full disk: the controller reports each
    worker's stop (sent through workeroutput), the rows point only at episodes that are
    there (in the merged dataset or, when the merge found no room, the parts it kept)."""
    require_lerobot()
    where = disk / "run"
    where.mkdir()
    fill(disk, leave=LEAVE)
    proc, doc = session(where, tmp_path, 12, "--hud-record=ds", "-n", "2")
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "INTERNALERROR" not in text
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED recording failed")]
    assert failed, text
    assert any("stopped: the disk is full" in ln or "merging the workers'" in ln for ln in failed)
    assert len(failed) <= 3  # one per worker part at most, and the merge
    check_rows_point_at_whole_episodes(doc)
    assert not [p for p in where.rglob("*.gif") if p.stat().st_size == 0]
