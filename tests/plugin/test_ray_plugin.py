"""The plugin on the REAL Ray test cluster (tests/conftest.py: ``cluster``): delegated items.

Inner pytest sessions run in this process (``runpytest_inprocess``), which has already
joined the session's cluster, so they use it as it is (one cluster per test session).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ray_cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]

WHERE = """
import os, sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "examples"))
from envs.pendulum import swing_up  # noqa: E402
from envs.pusht import push_t  # noqa: E402


@pytest.mark.hud(tasks=[swing_up.task(seed=s) for s in range(2)] + [push_t.task(seed=0)])
def test_rollout(hud_result, request):
    assert hud_result.error is None, hud_result.error
    ray = hud_result.agent_info.get("ray")
    if request.config.getoption("hud_delegate") == "ray":
        assert ray is not None and ray["pid"] != os.getpid(), hud_result.agent_info
    else:
        assert ray is None
"""


@pytest.fixture
def examples(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copytree(ROOT / "examples", pytester.path / "examples")
    pytester.makepyfile(test_where=WHERE)
    return pytester


def rows(path: Path) -> list[tuple[Any, ...]]:
    doc = json.loads(path.read_text())
    return sorted(
        (r["nodeid"], r["steps"], r["total_reward"], r["success"], r["error"])
        for r in doc["rollouts"]
    )


@pytest.mark.lerobot
def test_delegated_items_fold_back_results_videos_and_episodes(
    cluster: LocalCluster, examples: pytest.Pytester
) -> None:
    common = ["-p", "no:cacheprovider", "--hud-agent=zero", "test_where.py"]
    local = examples.runpytest_inprocess(*common, "--hud-results=local.json")
    local.assert_outcomes(passed=3)
    delegated = examples.runpytest_inprocess(
        *common, "--hud-delegate=ray", "--hud-results=ray.json", "--hud-record=data"
    )
    delegated.assert_outcomes(passed=3)
    assert rows(examples.path / "ray.json") == rows(examples.path / "local.json")

    doc = json.loads((examples.path / "ray.json").read_text())
    (pusht,) = [r for r in doc["rollouts"] if "push_t" in r["nodeid"]]
    assert pusht["video"] and Path(pusht["video"]).is_file(), pusht  # the shared folder
    assert Path(pusht["video"]).parent == examples.path / ".hud" / "videos"
    data = examples.path / "data"
    for env, episodes in (("pendulum", 2), ("pusht", 1)):  # parts merged in test order
        info = json.loads((data / env / "meta" / "info.json").read_text())
        assert info["total_episodes"] == episodes, (env, info)
    assert [r["dataset"]["root"] for r in doc["rollouts"]] == [
        str(data / "pendulum"),
        str(data / "pendulum"),
        str(data / "pusht"),
    ]
    assert not list(data.glob(".*.parts"))


def test_delegate_refuses_a_shared_substrate(examples: pytest.Pytester) -> None:
    result = examples.runpytest_inprocess("--hud-delegate=ray", "--hud-shared=2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hud-delegate*Shared substrate*"])


SWING = """
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "examples"))
from envs.pendulum import swing_up  # noqa: E402


@pytest.mark.hud(tasks=[swing_up.task(seed=s) for s in range(4)])
def test_swing(hud_result):
    assert (hud_result.error, hud_result.steps) == (None, 200), hud_result.error
"""


@pytest.mark.anyio
async def test_named_replicas_serve_an_openpi_ray_agent(
    cluster: LocalCluster, examples: pytest.Pytester
) -> None:
    from pytest_hud.robot.agent.model import ZeroModel
    from pytest_hud.robot.agent.replicas import PolicyReplicas

    examples.makepyfile(test_swing=SWING)
    async with PolicyReplicas(ZeroModel, 2, num_cpus=0.5, name="zeros") as replicas:
        result = examples.runpytest_inprocess(
            "-p", "no:cacheprovider", "--hud-agent=openpi:ray:zeros", "test_swing.py"
        )
        batches = await replicas.batches()
        missing = examples.runpytest_inprocess(
            "-p", "no:cacheprovider", "--hud-agent=openpi:ray:nope", "test_swing.py"
        )
    result.assert_outcomes(passed=4)
    assert all(sum(b) >= 2 * 200 for b in batches), [sum(b) for b in batches]  # 2 each
    # an agent that cannot load is one usage error before any item runs (issue 11)
    text = missing.stdout.str() + missing.stderr.str()
    assert missing.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "no policy replicas named 'nope'" in text and "got ['zeros']" in text


@pytest.mark.timeout(1800)  # two runs of the example suite, -n 2, on a loaded machine
def test_xdist_workers_share_one_cluster_the_controller_stops(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's done-when: ``pytest examples/tests --hud-runtime=ray -n 2`` gives the
    local runtime's results, on one cluster (the controller's), and leaves no process."""
    import re
    import subprocess

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    shutil.copytree(ROOT / "examples", pytester.path / "examples")
    common = ["-p", "no:cacheprovider", "examples/tests", "-n", "2", "--hud-agent=zero"]
    local = pytester.runpytest_subprocess(
        *common, "--hud-runtime=local", "--hud-results=local.json", timeout=900
    )
    on_ray = pytester.runpytest_subprocess(
        *common, "--hud-runtime=ray", "--hud-results=ray.json", timeout=900
    )
    assert on_ray.ret == local.ret, on_ray.stdout.str()[-3000:]
    # the same outcomes; warnings aside: a sim's import warnings (pygame's) surface where it
    # runs, the pytest worker locally and the Ray actor on Ray
    ray_outcomes, local_outcomes = on_ray.parseoutcomes(), local.parseoutcomes()
    ray_outcomes.pop("warnings", None)
    local_outcomes.pop("warnings", None)
    assert ray_outcomes == local_outcomes
    assert rows(pytester.path / "ray.json") == rows(pytester.path / "local.json")
    started = re.findall(
        r"one Ray cluster for the session at (\S+) \(temp dir (\S+)\)", on_ray.stderr.str()
    )
    assert len(started) == 1, on_ray.stderr.str()[-3000:]  # the controller's, once
    address, temp_dir = started[0]
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    assert temp_dir not in ps.stdout, [line for line in ps.stdout.splitlines() if temp_dir in line]
    ss = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    assert f":{address.rsplit(':', 1)[1]} " not in ss
    assert not Path(temp_dir).exists()


HANG = """
import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "examples"))
from envs.pendulum import swing_up  # noqa: E402


@pytest.fixture(scope="session")
def hud_agent():
    async def hang(run):
        await asyncio.sleep(3600)
        return {}

    return hang


@pytest.mark.hud(tasks=[swing_up.task(seed=0)])
def test_hangs(hud_result):
    pass
"""


@pytest.mark.timeout(900)
def test_ctrl_c_leaves_no_actor_and_no_process(
    cluster: LocalCluster, examples: pytest.Pytester
) -> None:
    """SIGINT to a pytest run whose item's env server is a Ray actor: the actor dies
    (state API), no process of the run or of its env is left, the cluster stays."""
    import signal
    import subprocess
    import sys
    import time

    from ray.util.state import list_actors

    def alive() -> list[Any]:
        found = list_actors(filters=[("state", "!=", "DEAD")], timeout=30)
        return [a for a in found if a.class_name == "EnvServerActor"]

    assert not alive()
    examples.makepyfile(test_hang=HANG)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "test_hang.py",
            f"--hud-runtime=ray:{cluster.address}",
        ],
        cwd=examples.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not [a for a in alive() if a.state == "ALIVE"]:
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the item's actor never came up"
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert "KeyboardInterrupt" in out, out[-2000:]
    deadline = time.monotonic() + 60
    while left := alive():
        assert time.monotonic() < deadline, f"actors alive 60 s after Ctrl-C: {left}"
        time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    ours = [line for line in ps.stdout.splitlines() if str(examples.path) in line]
    assert not ours, ours
    assert "EnvServerActor" not in ps.stdout
