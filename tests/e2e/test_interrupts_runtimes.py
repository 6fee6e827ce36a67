"""Issue 57 #1: an interrupted session leaves nothing, on every runtime. A real pytest session
under -n 2 (rows that finish, rows that step until interrupted) is interrupted when a named
phase is reached (an event: the rollouts' start markers, a ledger line, a line it prints, a
file that appears; never a sleep), then: it exits within a bound, and no process it started
(Ray's daemons and pytest-hud's watchdog included), no container of its session, no
listening port, no file in its TMPDIR is left; the ledger holds every episode the session
reported exactly once. A server started by hand beside it (an env server for tcp://, a policy
server for openpi:) outlives it, drops its connections, and leaves nothing when stopped in
turn. The same harness at random moments, many times: bench/interrupts.py."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from interrupted import ENV, GONE_BOUND, PROBE, HandServer, Left, Session, probed, short_tmp
from needs import require
from paths import HELPERS, ROOT
from waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

QUICK, ENDLESS = 4, 2
#: seconds a phase may take to come: a Ray head or an image build on a loaded machine
PHASE_BOUND = 600.0


Phase = Callable[[Session], object]


@pytest.fixture
def tmp() -> Iterator[Path]:
    """The session's TMPDIR (short: a Ray head's socket paths live under it)."""
    folder = short_tmp()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def interrupt_image(client: Any) -> str:
    """An image serving tests/helpers/envs/interrupt_env.py, built once, cached by content."""
    from docker_helpers import base_image

    from pytest_hud.runtime.docker import build_image

    base_image(client)
    return build_image("pytest-hud-interrupt:test", module=ENV.name, extra_files={ENV.name: ENV})


def require_ray() -> None:
    require(importlib.util.find_spec("ray"), "ray", "run scripts/setup --ray")


def interrupted(
    session: Session,
    signals: list[tuple[int, str]],
    second_when: Callable[[], object] | None = None,
) -> Left:
    """Send the first of ``signals``; the next once ``second_when()`` holds (bounded); then
    what the ended session left (the session killed if it outlived its bound)."""
    first, *rest = signals
    session.signal(*first)
    for sig in rest:
        assert second_when is not None
        assert wait_for(lambda: second_when() or session.ended(), 120), session.output()
        session.signal(*sig)
    code = session.wait_exit()
    assert code is not None, (
        f"the session did not exit within its bound after {session.signals}:\n{session.output()}"
    )
    return session.leftovers()


def assert_nothing_left(left: Left, session: Session) -> None:
    assert left.nothing(), f"after {session.signals}: {left.summary()}\n{session.output(40)}"


def mid_rollout(session: Session) -> bool:
    """An episode is in the ledger and an endless row's rollout runs: the session is
    mid-rollout, whichever worker got which rows."""
    return bool(session.episodes()) and session.endless_running()


def run_interrupted(
    session: Session,
    signals: list[tuple[int, str]],
    phase: Phase = mid_rollout,
    second_when: Callable[[Session, int], object] | None = None,
) -> Left:
    """Start ``session``, send ``signals`` once ``phase`` is reached (the second once
    ``second_when(session, processes at the first signal)`` holds), and return what it
    left; what finished before the interrupt is in the ledger, once each."""
    session.start()
    try:
        assert session.until(lambda: phase(session), PHASE_BOUND), (
            f"the phase was not reached:\n{session.output()}"
        )
        before = len(probed(session.token))
        second = None if second_when is None else (lambda: second_when(session, before))
        left = interrupted(session, signals, second)
        if phase is mid_rollout:
            assert session.episodes(), "the episode that finished first is not in the ledger"
        return left
    finally:
        session.close()


def teardown_under_way(session: Session, before: int) -> bool:
    """A process of the session is gone since the first signal: its teardown runs."""
    return len(probed(session.token)) < before


def test_local_sims_in_forked_processes_ctrl_c(tmp_path: Path, tmp: Path) -> None:
    session = Session(tmp_path, runtime="local", flags=["--hud-sim-process"], tmp=tmp)
    left = run_interrupted(session, [(signal.SIGINT, "group")])
    assert_nothing_left(left, session)


def test_subprocess_sigterm_to_the_controller(tmp_path: Path, tmp: Path) -> None:
    session = Session(tmp_path, runtime="subprocess", tmp=tmp)
    left = run_interrupted(session, [(signal.SIGTERM, "controller")])
    assert_nothing_left(left, session)


@pytest.mark.docker
def test_docker_a_second_ctrl_c_in_the_teardown(
    tmp_path: Path, tmp: Path, interrupt_image: str
) -> None:
    session = Session(tmp_path, runtime=f"docker:{interrupt_image}", tmp=tmp)
    ctrl_c = (signal.SIGINT, "group")
    left = run_interrupted(session, [ctrl_c, ctrl_c], second_when=teardown_under_way)
    assert_nothing_left(left, session)


@pytest.mark.ray
def test_ray_ctrl_c_mid_rollout_leaves_no_ray_process(tmp_path: Path, tmp: Path) -> None:
    """The reported leak: the session's Ray head (started by the controller under -n 2)
    left its gcs_server and autoscaler monitor running after a Ctrl-C."""
    require_ray()
    session = Session(tmp_path, runtime="ray", tmp=tmp)
    left = run_interrupted(session, [(signal.SIGINT, "group")])
    assert_nothing_left(left, session)


@pytest.mark.ray
@pytest.mark.parametrize(
    "interrupt",
    [
        pytest.param((signal.SIGINT, "group"), id="ctrl-c"),
        pytest.param((signal.SIGKILL, "controller"), id="killed-outright"),
    ],
)
def test_ray_without_xdist_interrupted_leaves_no_ray_folder(
    tmp_path: Path, tmp: Path, interrupt: tuple[int, str]
) -> None:
    """Without xdist the session starts a local cluster of its own in-process: a Ctrl-C
    mid-rollout leaves none of its processes and not its folder (bench/interrupts.py found
    ``$TMPDIR/ray/session_*``, Ray's default, kept after every such session); SIGKILLed
    (nothing of it runs after; as a Ctrl-C that lands while its exit removes the cluster,
    which bench/interrupts.py found), a watchdog removes the cluster's processes and folder."""
    require_ray()
    session = Session(tmp_path, runtime="ray", workers=0, tmp=tmp)
    left = run_interrupted(session, [interrupt])
    assert_nothing_left(left, session)


@pytest.mark.ray
def test_ray_ctrl_c_while_the_head_starts(tmp_path: Path, tmp: Path) -> None:
    """Interrupted at configure, while ``ray start`` brings the head up (its GCS server
    is running, the session has not said the cluster is up)."""
    require_ray()
    session = Session(tmp_path, runtime="ray", tmp=tmp)

    def head_starting(session: Session) -> bool:
        return any("gcs_server" in cmd for cmd in probed(session.token).values())

    left = run_interrupted(session, [(signal.SIGINT, "group")], phase=head_starting)
    assert_nothing_left(left, session)


@pytest.mark.ray
def test_ray_a_second_ctrl_c_while_the_head_stops(tmp_path: Path, tmp: Path) -> None:
    """A Ctrl-C mid-rollout, and a second one while the controller stops the session's head
    (its raylet gone, its GCS server, which ignores SIGTERM, still up: within the stop's
    grace before SIGKILL): the stop is cut short, and the head's watchdog reaps the rest."""
    require_ray()
    session = Session(tmp_path, runtime="ray", tmp=tmp)

    def head_stopping(session: Session, before: int) -> bool:
        ray = [cmd for cmd in probed(session.token).values() if "/ray/" in cmd]
        return any("gcs_server" in c for c in ray) and not any("raylet" in c for c in ray)

    ctrl_c = (signal.SIGINT, "group")
    left = run_interrupted(session, [ctrl_c, ctrl_c], second_when=head_stopping)
    assert_nothing_left(left, session)


def test_tcp_env_server_by_hand_outlives_the_session(tmp_path: Path, tmp: Path) -> None:
    """``python -m pytest_hud.serve`` started by hand; the session (``--hud-runtime=tcp://``)
    is SIGTERMed mid-rollout: the server keeps serving with none of the session's
    connections left, and a Ctrl-C to it then leaves nothing (its token file included)."""
    server_dir, marks = tmp_path / "server", tmp_path / "marks"
    server_dir.mkdir()
    shutil.copy(ENV, server_dir / ENV.name)
    server = HandServer(
        [sys.executable, "-m", "pytest_hud.serve", ENV.name, "--port", "0"],
        "PYTEST_HUD_SERVER",
        tmp,
        server_dir,
        env={"INTERRUPT_DIR": str(marks)},  # the rows run in the server: it marks them
    )
    try:
        # errors_ok: the one server has one slot of each sim, so a row the other worker
        # starts meanwhile errors ("all 1 slots are claimed ... serve more num_envs")
        session = Session(
            tmp_path / "session", runtime=server.url, tmp=tmp, marks=marks, errors_ok=True
        )
        # its token file (written once it serves), which the session reads
        assert wait_for(lambda: server.files(tmp), 60), "the server keeps no token file"
        session.theirs = server.files(tmp)
        left = run_interrupted(session, [(signal.SIGTERM, "group")])
        assert_nothing_left(left, session)
        assert server.alive(), "the hand-started env server died with the session"
        assert wait_for(lambda: server.connections() == 0, 60), "connections left open"
        code, stayed = server.stop(signal.SIGINT)
        assert code is not None and not stayed, (code, stayed, "".join(server.lines[-20:]))
    finally:
        server.kill()
    assert [f for f in tmp.rglob("*") if f.is_file()] == [], "the server's token file stayed"


def test_policy_server_by_hand_outlives_the_session(tmp_path: Path, tmp: Path) -> None:
    """``python -m pytest_hud policy-server --token`` started by hand; a -n 2 session acting
    through it (``--hud-agent=openpi:HOST:PORT``, the token read from the server's token
    file) is Ctrl-C'd mid-rollout: the server keeps serving with none of the session's
    connections left; SIGTERM to it leaves nothing (its token file included)."""
    server = HandServer(
        # --token: it admits only clients with the token it keeps in its token file
        [sys.executable, "-m", "pytest_hud", "policy-server", "--agent=zero", "--port=0",
         "--token"],
        "PYTEST_HUD_POLICY_SERVER",
        tmp,
        tmp_path,
    )  # fmt: skip
    try:
        session = Session(
            tmp_path / "session", runtime="local", agent=f"openpi:{server.address}", tmp=tmp
        )
        # its token file (written once it serves), which the session's agents read
        assert wait_for(lambda: server.files(tmp), 60), "the server keeps no token file"
        session.theirs = server.files(tmp)
        left = run_interrupted(session, [(signal.SIGINT, "group")])
        assert_nothing_left(left, session)
        assert server.alive(), "the hand-started policy server died with the session"
        assert wait_for(lambda: server.connections() == 0, 60), "connections left open"
        code, stayed = server.stop(signal.SIGTERM)
        assert code is not None and not stayed, (code, stayed, "".join(server.lines[-20:]))
    finally:
        server.kill()
    assert [f for f in tmp.rglob("*") if f.is_file()] == [], "the server's token file stayed"


def test_the_web_operator_console_ctrl_c_at_its_gate(tmp_path: Path, tmp: Path) -> None:
    """``--hud-operator=web`` waiting at its reset gate for a person: a Ctrl-C ends the
    session, and its console (a server on a port of its own) goes with it."""
    from pytest_hud.features.robots.web import URL_FILE_ENV

    url = tmp_path / "console-url.txt"
    session = Session(
        tmp_path / "session",
        runtime="local",
        workers=0,
        quick=2,
        endless=0,
        flags=["--hud-operator=web"],
        env={URL_FILE_ENV: str(url)},
        tmp=tmp,
    )
    left = run_interrupted(session, [(signal.SIGINT, "group")], phase=lambda s: url.exists())
    assert_nothing_left(left, session)


WORKER_CLUSTER_CONFTEST = """
import pytest
from ray_cluster import joined


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    yield from joined(tmp_path_factory)
"""

WORKER_CLUSTER_TESTS = """
import os
import time
from pathlib import Path

import pytest


@pytest.mark.xdist_group("ray")
def test_holds_the_cluster(cluster):
    Path(os.environ["CLUSTER_UP"]).write_text(str(cluster.temp_dir))
    time.sleep(600)  # the session is interrupted long before


def test_beside_it():
    pass
"""


@pytest.mark.ray
def test_a_ray_cluster_a_worker_started_is_reaped_after_ctrl_c(tmp_path: Path) -> None:
    """The leak as CI met it: under -n 2 a worker's session fixture started a Ray cluster
    (tests/helpers/ray_cluster.py, the production RayHead plus a node); a Ctrl-C reaches
    every process, and the worker's teardown sends SIGTERM, which the GCS server and the
    autoscaler monitor ignore, then is cut short by xdist's (execnet interrupts a worker
    still busy 5 s after the controller's teardown began) before its SIGKILL: both were
    left running, orphaned. The head's watchdog now reaps them and its folder."""
    require_ray()
    (tmp_path / "conftest.py").write_text(WORKER_CLUSTER_CONFTEST)
    (tmp_path / "test_uses_ray.py").write_text(WORKER_CLUSTER_TESTS)
    token, up = uuid.uuid4().hex, tmp_path / "cluster-up"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RAY_ADDRESS"))}
    env.update({PROBE: token, "CLUSTER_UP": str(up)})
    env["PYTHONPATH"] = os.pathsep.join([str(HELPERS), str(ROOT)])
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"]
    proc = subprocess.Popen(
        [*argv, "--dist", "loadgroup", "test_uses_ray.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: up.exists() or proc.poll() is not None, PHASE_BOUND)
        assert up.exists(), "the cluster did not come up"
        folder = Path(up.read_text()).parent
        assert any("gcs_server" in cmd for cmd in probed(token).values())
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C at the terminal
        proc.wait(180)
        assert wait_for(lambda: not probed(token), GONE_BOUND), (
            f"left after the Ctrl-C: {probed(token)}"
        )
        assert wait_for(lambda: not folder.exists(), 30), f"{folder} was left"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        for pid in probed(token):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if proc.stdout is not None:
            proc.stdout.close()
