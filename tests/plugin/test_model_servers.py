"""One model per device under ``pytest -n K`` (issue 54): the controller serves a model-backed
agent's model once per device and every worker's rollouts batch in its forwards; per-worker
copies on request; cheap agents in the workers; the server owned like a substrate (a killed
server or worker ends in ERRORs naming the fix, an interrupted session leaves no process).

Real pytest sessions (subprocesses, real xdist workers, real model servers on the openpi
wire) over gymnasium's Pendulum served in-process. This machine has one device (its CPU);
where a test needs two GPUs, its session's conftest fakes ``torch.cuda`` (the count, as
torch reads CUDA_VISIBLE_DEVICES) and the factory records the device it was placed on,
which is all a GPU would add: the servers and workers are real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from procs import alive, probed
from waiting import wait_for

from pytest_hud.plumbing.process import child_env

ENV = """
from pytest_hud import Environment

env = Environment("pend")
sim = env.gym("Pendulum-v1")


@env.template()
async def swing(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": "swing up", "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
"""

AGENTS = '''
import json, os, time
from pathlib import Path

import numpy as np
from pytest_hud.robot import RobotAgent
from pytest_hud.robot.agent.device import placed_device
from pytest_hud.robot.agent.model import Model

MARKS = Path(os.environ["MARKS"])


class Slow(Model):
    """Zeros after a forward of DELAY_S; the first forward leaves a mark."""

    def infer(self, batch):
        n = len(next(iter(batch.values())))
        mark = MARKS / f"forward-{os.getpid()}"
        if not mark.exists():
            mark.write_text("")
        time.sleep(float(os.environ.get("DELAY_S", "0.01")))
        return np.zeros((n, 1, 1), np.float32)


class Binding(Slow):
    def bind(self, spaces):  # sizes itself from each env's spaces: not servable apart
        self.size = spaces.action_feature.size


def _called(kind):
    call = {"kind": kind, "pid": os.getpid(), "device": placed_device(),
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "worker": os.environ.get("PYTEST_XDIST_WORKER")}
    (MARKS / f"call-{kind}-{os.getpid()}.json").write_text(json.dumps(call))


def make():
    _called("make")
    return RobotAgent(Slow(), name="slow")


def binding():
    _called("binding")
    return RobotAgent(Binding(), name="binding")


def broken():
    raise RuntimeError("the checkpoint is corrupt on purpose")
'''

TESTS = """
import os
import pytest
from pend_env import swing

ROWS = [swing.task(seed=s) for s in range(int(os.environ.get("ROWS", "8")))]


@pytest.mark.hud(tasks=ROWS)
def test_swing(hud_result):
    pass
"""

#: a conftest giving the session two GPUs where torch looks for them (this machine has none)
FAKE_GPUS = """
import os
import torch
import pytest_hud.features.devices.placement as placement

placement._no_driver = lambda: False  # a driver: ask torch
torch.cuda.is_available = lambda: True
# torch counts what CUDA_VISIBLE_DEVICES lists, else the machine's 2
torch.cuda.device_count = lambda: len(
    [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "0,1").split(",") if d]
)
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(pend_env=ENV, my_agents=AGENTS, test_swing=TESTS)
    pytester.makeconftest("import pend_env  # noqa: F401\n")
    marks = pytester.path / "marks"
    marks.mkdir()
    monkeypatch.setenv("MARKS", str(marks))
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(pytester.path), path) if p))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return pytester


def run(project: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = project.path / "results.json"
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--hud-max-steps=12", f"--hud-results={out}", *args,
        timeout=600,
    )  # fmt: skip
    return result, (json.loads(out.read_text()) if out.exists() else {})


def calls(project: pytest.Pytester, kind: str = "make") -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (project.path / "marks").glob(f"call-{kind}-*")]


def graded(doc: dict[str, Any], rows: int = 8) -> None:
    """Every row ran to its end, none errored."""
    rollouts = doc["rollouts"]
    assert len(rollouts) == rows, rollouts
    assert [r["error"] for r in rollouts] == [None] * rows
    assert all(r["steps"] == 12 for r in rollouts), [r["steps"] for r in rollouts]


# -- placement --------------------------------------------------------------------------------
def test_a_factory_is_called_once_and_every_workers_rollouts_share_its_forwards(
    project: pytest.Pytester,
) -> None:
    result, doc = run(
        project, "-n", "2", "--hud-agent=my_agents:make", "--hud-concurrency=2", "--html=r.html"
    )
    assert result.ret == 0, result.stdout.str()
    graded(doc)
    (call,) = calls(project)  # once: in the server, not in either worker
    block = doc["devices"]
    assert block["placement"] == "shared" and block["devices"] == ["cpu"]
    (server,) = block["servers"]
    assert call["pid"] == server["pid"] and call["worker"] is None and call["device"] == "cpu"
    assert server["requests"] == 8 * 12 == sum(server["requests_per_worker"].values())
    assert set(server["requests_per_worker"]) == {"gw0", "gw1"}
    # each worker has 2 rollouts in flight: a wider forward held rows of both workers
    assert max(int(w) for w in server["widths"]) > 2, server["widths"]
    assert 0 < server["busy_share"] <= 1 and server["forward_ms"] >= 10
    out = result.stdout.str()
    assert "models: placement shared on cpu" in out
    assert f"model server my_agents:make on cpu (pid {server['pid']}): 96 requests" in out
    html = (project.path / "r.html").read_text()
    assert "Models: placement shared on cpu" in html and "gw0: " in html and "gw1: " in html
    assert wait_for(lambda: not alive(server["pid"]), 60), "the server outlived its session"


def test_per_worker_placement_builds_a_copy_in_each_worker(project: pytest.Pytester) -> None:
    result, doc = run(
        project, "-n", "2", "--hud-agent=my_agents:make", "--hud-model-placement=worker"
    )
    assert result.ret == 0, result.stdout.str()
    graded(doc)
    assert sorted(c["worker"] for c in calls(project)) == ["gw0", "gw1"]
    assert {c["device"] for c in calls(project)} == {"cpu"}
    assert doc["devices"] == {"placement": "worker", "devices": ["cpu"], "servers": []}
    assert "model server" not in result.stdout.str()


def test_cheap_agents_stay_in_the_workers(project: pytest.Pytester) -> None:
    result, doc = run(project, "-n", "2", "--hud-agent=zero")
    assert result.ret == 0, result.stdout.str()
    graded(doc)
    assert doc["devices"]["placement"] == "worker" and doc["devices"]["servers"] == []
    assert "model of --hud-agent" not in result.stderr.str()


def test_a_model_that_binds_to_each_env_runs_in_each_worker_and_says_why(
    project: pytest.Pytester,
) -> None:
    result, doc = run(project, "-n", "2", "--hud-agent=my_agents:binding")
    assert result.ret == 0, result.stdout.str()
    graded(doc)
    err = result.stderr.str()
    assert "--hud-agent=my_agents:binding runs in each worker" in err, err
    assert "binds to each env's spaces" in err
    # the server built it once to find that out; then each worker its own
    assert sorted(str(c["worker"]) for c in calls(project, "binding")) == ["None", "gw0", "gw1"]
    block = doc["devices"]
    assert block["placement"] == "worker" and block["servers"] == []
    assert "binds to each env's spaces" in block["fallback"]


def test_a_factory_that_raises_is_one_usage_error(project: pytest.Pytester) -> None:
    result, doc = run(project, "-n", "2", "--hud-agent=my_agents:broken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert "--hud-agent=my_agents:broken" in err and "the checkpoint is corrupt on purpose" in err
    assert not doc.get("rollouts")


# -- devices (two GPUs faked in torch.cuda: see the module docs) --------------------------------
@pytest.mark.parametrize(
    ("visible", "devices", "expected"),
    [(None, "cuda:0,cuda:1", ["0", "1"]), ("5,7", "auto", ["5", "7"])],
    ids=["listed", "auto-under-cuda-visible-devices"],
)
def test_one_shared_server_per_device_with_the_workers_spread_over_them(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    visible: str | None,
    devices: str,
    expected: list[str],
) -> None:
    project.makeconftest("import pend_env  # noqa: F401\n" + FAKE_GPUS)
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    result, doc = run(project, "-n", "4", "--hud-agent=my_agents:make", f"--hud-devices={devices}")
    assert result.ret == 0, result.stdout.str()
    graded(doc)
    made = calls(project)
    # one server per device, each seeing its GPU alone (as cuda:0)
    assert sorted(c["visible"] for c in made) == expected
    assert {c["device"] for c in made} == {"cuda:0"} and {c["worker"] for c in made} == {None}
    servers = {s["device"]: s for s in doc["devices"]["servers"]}
    assert sorted(servers) == ["cuda:0", "cuda:1"]
    assert set(servers["cuda:0"]["requests_per_worker"]) == {"gw0", "gw2"}
    assert set(servers["cuda:1"]["requests_per_worker"]) == {"gw1", "gw3"}


def test_per_worker_copies_go_on_device_i_mod_n(project: pytest.Pytester) -> None:
    project.makeconftest("import pend_env  # noqa: F401\n" + FAKE_GPUS)
    result, doc = run(
        project, "-n", "4", "--hud-agent=my_agents:make", "--hud-model-placement=worker",
        "--hud-devices=auto",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    graded(doc)
    placed = {c["worker"]: c["device"] for c in calls(project)}
    assert placed == {"gw0": "cuda:0", "gw1": "cuda:1", "gw2": "cuda:0", "gw3": "cuda:1"}


def test_a_gpu_that_is_not_visible_is_one_usage_error(project: pytest.Pytester) -> None:
    result, _ = run(project, "-n", "2", "--hud-agent=my_agents:make", "--hud-devices=cuda:3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--hud-devices names cuda:3, but this process sees no GPU" in err, err
    assert "fix: --hud-devices=auto" in err
    assert not calls(project)


# -- each worker keeps its rollouts in flight ---------------------------------------------------
#: the pendulum with each rollout's start and end marked (one clock for every process)
PACED_ENV = """
import os, time
from pathlib import Path

from pytest_hud import Environment

env = Environment("paced")
sim = env.gym("Pendulum-v1")
MARKS = Path(os.environ["MARKS"])


@env.template()
async def swing(seed: int = 0):
    ep = await sim.reset(seed=seed)
    (MARKS / f"start-{seed}").write_text(str(time.monotonic()))
    yield {"prompt": "swing up", "robot": {"token": ep["token"]}}
    grade = await sim.result(token=ep["token"])
    (MARKS / f"end-{seed}").write_text(str(time.monotonic()))
    yield grade
"""

#: the controller takes its time over each finished item, so the next items reach the
#: worker while the rollouts it already holds run
SLOW_HANDOUT = """
import os, time
import paced_env  # noqa: F401


def pytest_runtest_logreport(report):
    if report.when == "teardown" and not os.environ.get("PYTEST_XDIST_WORKER"):
        time.sleep(0.3)
"""


def test_items_handed_out_while_a_workers_rollouts_run_start_at_once(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker holds --hud-concurrency rollouts in flight whatever the hand-out's pace: an
    item that reaches it while the item it runs waits on its rollout starts then, not when
    that rollout ends (it would run a whole episode late, with fewer rows in every batch
    the shared server forms)."""
    project.makepyfile(paced_env=PACED_ENV, test_swing=TESTS.replace("pend_env", "paced_env"))
    project.makeconftest(SLOW_HANDOUT)
    monkeypatch.setenv("DELAY_S", "0.05")
    result, doc = run(
        project, "-n", "1", "--hud-agent=my_agents:make", "--hud-concurrency=4",
        "--hud-max-steps=60",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    assert [r["error"] for r in doc["rollouts"]] == [None] * 8
    marks = project.path / "marks"
    spans = sorted(
        (float((marks / f"start-{s}").read_text()), float((marks / f"end-{s}").read_text()))
        for s in range(8)
    )
    # two rounds of four: the second four all started before the first of them ended
    second = spans[4:]
    assert max(start for start, _ in second) < min(end for _, end in second), spans


# -- the server owned like a substrate ----------------------------------------------------------
def start_session(
    project: pytest.Pytester, token: str, *args: str, rows: int = 24
) -> subprocess.Popen[bytes]:
    env = {**child_env(), "HUD_LEAK_PROBE": token, "DELAY_S": "0.05", "ROWS": str(rows)}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"]
    argv += ["--hud-agent=my_agents:make", "--hud-concurrency=2", "--hud-max-steps=40"]
    argv += [f"--hud-results={project.path / 'results.json'}", *args]
    return subprocess.Popen(
        argv,
        cwd=project.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def forwarding(project: pytest.Pytester) -> bool:
    return bool(list((project.path / "marks").glob("forward-*")))


def ended(proc: subprocess.Popen[bytes], token: str) -> tuple[str, list[int]]:
    """The session's output once it ended (bounded), and what it left running."""
    try:
        out = proc.communicate(timeout=300)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the session did not end within 300 s")
    left = [] if wait_for(lambda: not probed(token), 60) else probed(token)
    return out, left


def test_a_server_killed_mid_session_errors_its_rollouts_naming_the_fix(
    project: pytest.Pytester,
) -> None:
    token = uuid.uuid4().hex
    proc = start_session(project, token)
    try:
        assert wait_for(lambda: forwarding(project), 240), "no forward ran"
        (call,) = calls(project)
        os.kill(call["pid"], signal.SIGKILL)
    finally:
        out, left = ended(proc, token)
    assert left == [], f"left running: {left}\n{out}"
    assert proc.returncode == 1, out
    doc = json.loads((project.path / "results.json").read_text())
    errors = [r for r in doc["rollouts"] if r["outcome"] == "error"]
    assert errors, out
    for row in errors:  # what became of the server, and what to do
        assert f"(pid {call['pid']}) was killed by signal SIGKILL" in row["error"], row["error"]
        assert "the rollouts it served are errors; fix: read its output below" in row["error"]
    (server,) = doc["devices"]["servers"]
    assert "was killed by signal SIGKILL" in server["died"]
    assert "DIED:" in out


def test_a_worker_killed_mid_session_is_an_error_and_the_rest_run_on(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(
        "import os, pathlib, pend_env  # noqa: F401\n"
        "def pytest_configure(config):\n"
        "    worker = os.environ.get('PYTEST_XDIST_WORKER')\n"
        "    if worker:\n"
        "        marks = pathlib.Path(os.environ['MARKS'])\n"
        "        (marks / f'pid-{worker}').write_text(str(os.getpid()))\n"
    )
    token = uuid.uuid4().hex
    proc = start_session(project, token)
    try:
        assert wait_for(lambda: forwarding(project), 240), "no forward ran"
        os.kill(int((project.path / "marks" / "pid-gw1").read_text()), signal.SIGKILL)
    finally:
        out, left = ended(proc, token)
    assert left == [], f"left running: {left}\n{out}"
    doc = json.loads((project.path / "results.json").read_text())
    crashed = [r for r in doc["rollouts"] if r["outcome"] == "error"]
    assert crashed and all(r["error_type"] == "WorkerCrashed" for r in crashed), out
    assert "fix: see the worker's output above" in crashed[0]["error"]
    assert len(doc["rollouts"]) == 24 and len(calls(project)) == 1, out
    assert sum(r["outcome"] == "passed" for r in doc["rollouts"]) == 24 - len(crashed)
    (server,) = doc["devices"]["servers"]
    assert "died" not in server  # the server served the replacement worker too


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_an_interrupted_session_leaves_no_model_server(project: pytest.Pytester, sig: str) -> None:
    token = uuid.uuid4().hex
    proc = start_session(project, token, rows=200)
    try:
        assert wait_for(lambda: forwarding(project), 240), "no forward ran"
        (call,) = calls(project)
        assert call["pid"] in probed(token)
        proc.send_signal(getattr(signal, sig))
    finally:
        out, left = ended(proc, token)
    assert left == [], f"{sig} left running: {left}\n{out}"


# -- a LeRobot checkpoint, loaded once for -n 4 -------------------------------------------------
#: every process of the session whose PYTHONPATH has the project: each time LeRobot's own code
#: opens a checkpoint's policy_preprocessor.json (what every load of it does, once; the
#: results' provenance hashes the same file, from pytest-hud's code) logged with the pid
AUDIT = """
import os, sys

def _by_lerobot():
    frame = sys._getframe(2)
    while frame is not None:
        if "/lerobot/" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False

def _audit(event, args):
    if event == "open" and str(args[0]).endswith("policy_preprocessor.json") and _by_lerobot():
        with open(os.environ["LOAD_LOG"], "a") as log:
            log.write(f"{os.getpid()} {os.environ.get('PYTEST_XDIST_WORKER', 'controller')}\\n")

if os.environ.get("LOAD_LOG"):
    sys.addaudithook(_audit)
"""

COMPAT_TESTS = """
import pytest
from compat_env import ENVS

ROWS = [ENVS["compat-honest"].templates["episode"].task(seed=s) for s in range(8)]


@pytest.mark.hud(tasks=ROWS)
def test_honest(hud_result):
    assert hud_result.success
"""


def test_a_checkpoint_loads_once_for_four_workers(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tiny_act_path: Path
) -> None:
    from paths import ENVS

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ENVS), os.environ["PYTHONPATH"]]))
    monkeypatch.setenv("LOAD_LOG", str(project.path / "loads.txt"))
    project.makepyfile(sitecustomize=AUDIT, test_honest=COMPAT_TESTS)
    (project.path / "test_swing.py").unlink()
    result, doc = run(project, "-n", "4", f"--hud-agent=lerobot:{tiny_act_path}")
    assert result.ret == 0, result.stdout.str()
    assert [r["error"] for r in doc["rollouts"]] == [None] * 8
    loads = (project.path / "loads.txt").read_text().splitlines()
    (server,) = doc["devices"]["servers"]
    # the server's one load, nobody else's (the server, the controller's child, has no xdist
    # worker id; the hook, in every process of the session, sees a load in any of them)
    assert loads == [f"{server['pid']} controller"]
    assert server["model"] == "LeRobotModel" and server["requests"] > 0
    assert set(server["requests_per_worker"]) <= {"gw0", "gw1", "gw2", "gw3"}
