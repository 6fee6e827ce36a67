"""Issue 12 #7: interrupting a session (SIGINT, SIGTERM, SIGKILL; to the controller alone
or to its whole process group) leaves no process behind: every process the session
started carries a probe variable in its environment, and after the session ends (a
bounded wait) no process with it may remain. Real signals to a real pytest subprocess
running real gymnasium sims, under xdist (-n 2), with the local and docker runtimes (no
container labelled with the session's id may remain either)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from docker_helpers import HANG_ENV, session_containers
from interrupted import probed as _probed
from waiting import wait_for

from pytest_hud.plumbing.process import child_env
from pytest_hud.runtime.docker.owners import reap_containers


def _is_zygote(pid: int) -> bool:
    try:
        return b"pytest_hud.forkserver.zygote" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("target", ["controller", "group"])
@pytest.mark.parametrize("runtime", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_an_interrupted_session_leaves_no_process(
    request: pytest.FixtureRequest, tmp_path: Path, sig: str, target: str, runtime: str
) -> None:
    (tmp_path / "hang_env.py").write_text(HANG_ENV.read_text())
    (tmp_path / "conftest.py").write_text("import hang_env  # noqa: F401\n")
    # local: sims in processes of their own (forked by each worker's zygote), the
    # placement with the most to leak; the default serves them in the worker itself
    flags = ["--hud-runtime=local", "--hud-sim-process"]
    if runtime == "docker":
        flags = [f"--hud-runtime=docker:{request.getfixturevalue('hang_image')}"]
    rows = "".join(f'{{"env": "hang", "id": "wait", "args": {{"n": {n}}}}}\n' for n in range(4))
    (tmp_path / "rows.jsonl").write_text(rows)
    token = uuid.uuid4().hex
    env = {**child_env(), "HUD_LEAK_PROBE": token, "PYTEST_HUD_SESSION": token}
    if runtime == "local":
        env["HANG_DIR"] = str(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "rows.jsonl",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--hud-agent=zero",
            *flags,
            "--hud-timeout=900",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        if runtime == "local":
            started = wait_for(lambda: len(list(tmp_path.glob("started-*"))) >= 2, 240)
        else:
            started = wait_for(lambda: len(session_containers(token)) >= 2, 240)
        assert started, "no rollout started within the bound"
        assert len(_probed(token)) >= 3, "the probe sees no session processes"
        if runtime == "local":  # sims are forked by each worker's zygote: it must go too
            assert any(_is_zygote(pid) for pid in _probed(token)), "no zygote among them"
        number = getattr(signal, sig)
        if target == "group":
            os.killpg(proc.pid, number)
        else:
            proc.send_signal(number)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the session did not end within 120 s of {sig} to the {target}")
        left = [] if wait_for(lambda: not _probed(token), 60) else sorted(_probed(token))
        assert left == [], f"{sig} to the {target} left processes behind: {left}"
        if runtime == "docker":
            if sig == "SIGKILL":  # nothing runs after SIGKILL: the next session's start reaps.
                # A create the engine was serving when the client died still completes after
                # it (and a removal can be in progress, 409): reap until none is left, bounded.
                wait_for(lambda: not reap_containers() and not session_containers(token), 60)
            assert session_containers(token) == [], f"{sig} to the {target} left containers behind"
    finally:
        if runtime == "docker":
            from pytest_hud.runtime.docker.engine import _client

            for cid in session_containers(token):
                with __import__("contextlib").suppress(Exception):
                    _client().containers.get(cid).remove(force=True)
        for pid in _probed(token):  # never leak from the test itself
            with __import__("contextlib").suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


#: a test that SIGTERMs its own session
TERMINATED = """
import os, signal, time


def test_terminated():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)
"""

#: a second SIGTERM while the first one's interrupt is being handled (``timeout`` signals
#: the process, then its group; a supervisor may repeat itself)
SECOND_SIGTERM = """
import os, signal
import pytest
import line_env  # noqa: F401


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    os.kill(os.getpid(), signal.SIGTERM)
"""


def test_a_second_sigterm_does_not_cut_the_first_ones_cleanup_short(suite) -> None:
    """Issue 55: a second SIGTERM while the first one's KeyboardInterrupt was handled raised
    another inside pytest's and the session's cleanup (a traceback out of the capture
    manager's teardown; the session's end skipped, its results unwritten). The session ends
    interrupted, once, and writes what it ran."""
    from line_suite import TESTS, run

    suite.makepyfile(test_line=TESTS, test_zz_terminated=TERMINATED)
    suite.makeconftest(SECOND_SIGTERM)
    result = run(suite, "-k", "reach or terminated", "--hud-results=r.json")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    result.stdout.fnmatch_lines(
        ["*hud results: r.json*", "*! KeyboardInterrupt: received SIGTERM !*"]
    )
    rows = json.loads((suite.path / "r.json").read_text())["rollouts"]
    assert len(rows) == 2, rows
