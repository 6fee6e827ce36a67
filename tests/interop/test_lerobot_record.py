"""``--hud-record`` on two xdist workers over LeRobot's own PushT (``env.lerobot``): the
merged dataset reads back through the installed lerobot's ``LeRobotDataset`` with one
episode per rollout, one frame per step, the env's control rate as fps, the env's answers
per frame, and its recorded actions replay, from each rollout's seed, to its recorded
states."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from needs import require, require_lerobot
from paths import ROOT

#: a nested pytest: two workers each import torch + lerobot and encode videos
pytestmark = [pytest.mark.lerobot_version, pytest.mark.timeout(1000)]

STEPS = 8
SEEDS = range(4)


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, dict]:
    require_lerobot()
    require(importlib.util.find_spec("gym_pusht"), "gym_pusht", "pip install 'lerobot[pusht]'")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "pusht_lerobot.py").write_text(
        textwrap.dedent(
            f"""
            from pytest_hud import Environment

            env = Environment("lerobot-pusht")
            sim = env.lerobot("pusht", episode_length={STEPS})

            @env.template()
            async def episode(seed: int = 0):
                ep = await sim.reset(seed=seed)
                yield {{"prompt": ep["prompt"], "robot": {{"token": ep["token"]}}}}
                yield await sim.result(token=ep["token"])
            """
        )
    )
    (tmp_path / "conftest.py").write_text(
        "import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent))\n"
        "import pusht_lerobot  # noqa: E402,F401\n"
    )
    (tmp_path / "test_rec.py").write_text(
        "import pytest\nfrom pusht_lerobot import episode\n\n\n"
        f"@pytest.mark.hud(tasks=[episode.task(seed=s) for s in {list(SEEDS)}], min_success=0.0)\n"
        "def test_rec(hud_result):\n"
        "    assert hud_result.dataset['episode_index'] is not None\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--hud-agent=random:0", "--hud-record=ds", "--hud-results=r.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return tmp_path / "ds", json.loads((tmp_path / "r.json").read_text())


def test_two_workers_record_one_dataset_lerobot_reads_back(recorded: tuple[Path, dict]) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from pytest_hud.interop.lerobot.envs import make_lerobot_env

    root, doc = recorded
    rollouts = doc["rollouts"]
    assert len(rollouts) == len(SEEDS)
    # both workers recorded: each row names the worker part its episode was merged from,
    # and the merged episodes are one per rollout
    parts = [Path(r["dataset"]["part"]) for r in rollouts]
    assert {p.name for p in parts} == {"gw0", "gw1"}, parts
    assert {p.parent.name for p in parts} == {f".{root.name}.parts"}
    assert {r["dataset"]["root"] for r in rollouts} == {str(root)}
    assert sorted(r["dataset"]["episode_index"] for r in rollouts) == list(range(len(SEEDS)))
    ds = LeRobotDataset("local/ds", root=root)
    assert ds.meta.total_episodes == len(SEEDS) and ds.fps == 10  # PushT's control rate
    assert ds.meta.total_frames == len(ds) == sum(r["steps"] for r in rollouts)
    assert {"observation.state", "observation.images.image", "action", "next.reward"} <= set(
        ds.features
    )
    frames: dict[int, list[dict]] = {}
    for i in range(len(ds)):
        frame = ds[i]
        frames.setdefault(int(frame["episode_index"]), []).append(frame)
    env = make_lerobot_env("pusht", episode_length=STEPS)
    try:
        for r in rollouts:
            episode = frames[r["dataset"]["episode_index"]]
            assert len(episode) == r["steps"] == STEPS
            obs, _ = env.reset(seed=[int(r["args"]["seed"])])
            for t, frame in enumerate(episode):
                assert int(frame["frame_index"]) == t
                state = np.asarray(frame["observation.state"], np.float32)
                np.testing.assert_array_equal(state, obs["observation/state"][0])
                action = np.asarray(frame["action"], np.float32)[None]
                obs, reward, *_ = env.step(action)
                assert float(frame["next.reward"]) == pytest.approx(float(reward[0]), abs=1e-6)
    finally:
        env.close()
