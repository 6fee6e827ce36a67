"""A LeRobot v3 dataset's files: the schema (camera keys, states, sizes), the destination
checked before the run, appending, crash safety, merging parts, and the Hub push (against a
local fake). Real rollouts into a dataset: test_dataset.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from datasets_synthetic import CAMERA_CONTRACT, decode, episode_rows, read, synthetic_episode
from needs import require_lerobot

from pytest_hud.robot import Contract
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


@pytest.fixture(autouse=True)
def _lerobot() -> None:
    require_lerobot()


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
