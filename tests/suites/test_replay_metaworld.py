"""Golden replay on MetaWorld (issue 28 #2): the train/eval example's expert demonstrations,
recorded with ``--hud-record``, replayed with ``--hud-replay``. The honest stack passes
(the env reproduces every state exactly, the shipped ACT checkpoint matches its own kind
of training data within the tolerance), and each deliberately broken stack is named:
a perturbed physics parameter (env drifts, the policy still matches), a gripper negated
in the policy's wiring (the policy diverges on the gripper dim only) or in the env (the
env drifts, first on the gripper's state), and an image flipped on its way into a
camera-reading policy (the policy diverges; flipping the camera back explains it).

Small: two expert episodes (drawer-open and window-open, 88-91 steps, state only), two
reach-v3 episodes with the sketch camera (recorded under ``-n 2``: one merged video file);
each replay is one pytest run."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from needs import require, require_lerobot
from paths import ROOT
from replay_stacks import AGENTS, CHECKPOINT, ENV_VARIANT, PROVIDER, TRAIN_EVAL

pytestmark = [
    pytest.mark.metaworld,
    pytest.mark.lerobot,
    pytest.mark.slow,
    pytest.mark.xdist_group("replay_metaworld"),  # one worker records the demos once
]
RUN_TIMEOUT_S = 600


def pytest_run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """One pytest session in ``cwd`` (bounded; its own process group is killed on timeout)."""
    environ = {**os.environ, "OMP_NUM_THREADS": "1", "MW_SKETCH": "0", **env}
    environ.pop("PYTEST_XDIST_WORKER", None)
    environ.pop("PYTEST_XDIST_WORKER_COUNT", None)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, out, "")


def record(out: Path, tasks: str, seeds: int, agent: str, sketch: str, *args: str) -> Path:
    """Expert (or ``agent``) episodes of the example's MetaWorld env, recorded."""
    result = pytest_run(
        ROOT,
        str(TRAIN_EVAL / "test_metaworld.py"),
        f"--hud-agent={agent}",
        "--hud-shared=1",
        f"--hud-record={out}",
        "--hud-allow-modules",
        *args,
        MW_TASKS=tasks,
        MW_SEED0="0",
        MW_SEEDS=str(seeds),
        MW_SKETCH=sketch,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    return out


@pytest.fixture(scope="session")  # once a worker, however xdist orders the items
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_lerobot()
    require(importlib.util.find_spec("metaworld"), "metaworld", "run scripts/setup --metaworld")
    root = tmp_path_factory.mktemp("replay_metaworld")
    expert = f"{TRAIN_EVAL / 'metaworld_env.py'}:expert"
    record(root / "demos", "drawer-open-v3,window-open-v3", 1, expert, sketch="0")
    agents = root / "stacks.py"
    agents.write_text(AGENTS)
    # under xdist: the worker's part merged, both episodes in one video file (read by seeking)
    record(root / "sketch_demos", "reach-v3", 2, f"{agents}:sketch_reach", "1", "-n", "2")
    return root


Replayed = tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]


def replay(
    data: Path, name: str, dataset: str, *args: str, env_variant: str | None = None, **env: str
) -> Replayed:
    """Replay ``dataset`` from a work folder of its own (its copy of the dataset, the
    agents file, and with ``env_variant`` the broken env and the conftest serving it)."""
    work = data / name
    work.mkdir()
    shutil.copytree(data / dataset, work / "ds")
    shutil.copy(data / "stacks.py", work / "stacks.py")
    if env_variant is not None:
        (work / "env_variant.py").write_text(ENV_VARIANT)
        (work / "conftest.py").write_text(PROVIDER)
        env["REPLAY_BREAK"] = env_variant
    result = pytest_run(
        work, "--hud-replay=ds", "--hud-results=r.json", "--hud-allow-modules", *args, **env
    )
    doc = json.loads((work / "r.json").read_text())
    blocks = sorted((r["replay"] for r in doc["rollouts"]), key=lambda b: b["episode"])
    return result, blocks


ACT = f"--hud-agent=lerobot:{CHECKPOINT}"


def test_the_honest_stack_passes(data: Path) -> None:
    result, blocks = replay(data, "honest", "demos", ACT)
    assert result.returncode == 0, result.stdout[-4000:]
    assert len(blocks) == 2
    for block in blocks:
        env, policy = block["env"], block["policy"]
        assert env["reproduces"] and env["max_error"] == 0.0  # MuJoCo replays bit for bit
        assert env["steps"]["recorded"] == env["steps"]["replayed"] > 80
        assert env["success"] == {"recorded": True, "replayed": True}
        assert policy["matches"] and policy["diverging"] == []
        # trained but imperfect: no dim's mean error reaches half the tolerance, though
        # single steps do exceed it (the expert's unclipped first actions)
        assert max(d["mean"] for d in policy["dims"]) < 0.5, policy["dims"]
    assert "env reproduces" in result.stdout and "policy matches" in result.stdout


def test_a_gripper_negated_in_the_policy_is_named(data: Path) -> None:
    result, blocks = replay(
        data, "negated_policy", "demos", "--hud-agent=stacks.py:negated_gripper"
    )
    assert result.returncode == 1, result.stdout[-4000:]
    for block in blocks:
        assert block["env"]["reproduces"]  # the env is not to blame
        policy = block["policy"]
        assert policy["diverging"] == [3]
        assert policy["dims"][3]["mean"] > 1.5 and policy["dims"][3]["first_past"] == 0
        assert policy["cause"].startswith("action[3] matches when negated: a sign convention")
    assert "policy diverges on dims ['action[3]']" in result.stdout


def test_a_perturbed_physics_parameter_is_named(data: Path) -> None:
    result, blocks = replay(data, "damping", "demos", ACT, env_variant="damping")
    assert result.returncode == 1, result.stdout[-4000:]
    for block in blocks:
        env = block["env"]
        assert not env["reproduces"] and env["first_drift_step"] is not None
        assert env["max_error"] > 0.2  # far past the 0.05 std tolerance
        assert block["verdict"].startswith(f"env drifts at step {env['first_drift_step']} (")
        assert block["policy"]["matches"]  # on the recorded observations: not to blame


def test_a_gripper_negated_in_the_env_is_named(data: Path) -> None:
    result, blocks = replay(data, "negated_env", "demos", env_variant="gripper")
    assert result.returncode == 1, result.stdout[-4000:]
    for block in blocks:
        # the gripper's opening is the first state to leave the recording
        assert "(agent_pos[3] past 0.05 std;" in block["env"]["verdict"]
        assert block["policy"] is None


def test_a_flipped_image_is_named(data: Path) -> None:
    honest, blocks = replay(data, "sketch", "sketch_demos", "--hud-agent=stacks.py:sketch_reach")
    assert honest.returncode == 0, honest.stdout[-4000:]
    assert all(b["env"]["reproduces"] and b["policy"]["matches"] for b in blocks)
    flipped, blocks = replay(
        data, "sketch_flipped", "sketch_demos", "--hud-agent=stacks.py:sketch_reach_flipped"
    )
    assert flipped.returncode == 1, flipped.stdout[-4000:]
    for block in blocks:
        assert block["env"]["reproduces"]
        policy = block["policy"]
        assert 1 in policy["diverging"]  # dy: up and down swap places in the top panel
        assert policy["cause"] == (
            "it matches with camera 'sketch' flipped vertically: the policy sees that input "
            "transformed"
        )
