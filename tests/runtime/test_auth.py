"""Nobody in who does not belong (issue 39): every server pytest-hud starts serves only peers
holding the session's secret. A stranger on this host (a raw socket, a WebSocket client
without the key, a policy client without the token) is refused in one line, without a
traceback, before it can start an episode, grade one or hold a slot; a stranger's flood
(hundreds of connections, idle ones, unfinished lines, shape bombs) leaves the owner's
session working. Every connection here goes to 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from paths import ROOT
from procs import COUNTER, env_server, raw_peers
from sims import COUNTER_CONTRACT, CounterSim

from pytest_hud.errors import ControlError
from pytest_hud.plumbing.auth import derive, prove, session_secret
from pytest_hud.plumbing.process import Child, child_env
from pytest_hud.plumbing.rpc import AuthError, Connection, Limits, RpcClient, serve_rpc
from pytest_hud.robot import RobotEndpoint
from pytest_hud.robot.agent.model import ZeroModel
from pytest_hud.robot.agent.policy_server import PolicyServer
from pytest_hud.robot.agent.remote import RemoteModel
from pytest_hud.robot.wire.codec import pack, unpack
from pytest_hud.runtime.control import ControlClient
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.server import ANNOUNCE as SERVER_ANNOUNCE

pytestmark = pytest.mark.anyio

FLOOD = 300


async def _echo(conn: Connection, method: str, params: dict[str, Any]) -> Any:
    if method == "boom":
        raise RuntimeError("the handler's own failure")
    return {"method": method}


async def _line(reader: asyncio.StreamReader, timeout: float = 30.0) -> dict[str, Any] | None:
    """The peer's next JSON line (None: it hung up)."""
    with contextlib.suppress(ConnectionError):
        async with asyncio.timeout(timeout):
            line = await reader.readline()
            return dict(json.loads(line)) if line else None
    return None


@contextlib.asynccontextmanager
async def rpc_server(secret: str | None, **limits: Any) -> AsyncIterator[int]:
    server = await serve_rpc(_echo, "127.0.0.1", 0, secret=secret, limits=Limits(**limits))
    try:
        yield next(iter(server.sockets)).getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_a_stranger_is_refused_on_the_control_channel_in_one_line() -> None:
    """No proof, a wrong proof, a method before the proof: one AuthError line, no
    traceback, the hang-up; the handler never runs. The owner's calls work, and the
    owner (who proved the secret) gets the traceback of its own failures."""
    secret = "s" * 64
    async with rpc_server(secret) as port:
        for first in (
            {"id": 1, "method": "start", "params": {"env": "counter"}},
            {"id": 1, "method": "auth", "params": {"proof": prove("wrong" * 13, "x")}},
            {"id": 1, "method": "auth", "params": {}},
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            hello = await _line(reader)
            assert hello is not None and hello["hello"] == "pytest-hud/1" and hello["nonce"]
            writer.write(json.dumps(first).encode() + b"\n")
            refusal = await _line(reader)
            assert refusal is not None and refusal["error"]["type"] == "AuthError", refusal
            assert "traceback" not in refusal["error"] and "File " not in json.dumps(refusal)
            assert await _line(reader) is None  # hung up
            writer.close()
        with pytest.raises(AuthError, match="none was given"):
            await RpcClient.connect("127.0.0.1", port, secret=None)
        with pytest.raises(AuthError, match="refused this client"):
            await RpcClient.connect("127.0.0.1", port, secret="t" * 64)
        owner = await RpcClient.connect("127.0.0.1", port, secret=secret)
        try:
            assert await owner.call("ping") == {"method": "ping"}
            with pytest.raises(Exception) as failed:
                await owner.call("boom")
            assert "Traceback" in getattr(failed.value, "remote_traceback", "")
        finally:
            await owner.close()


async def test_a_stranger_that_says_nothing_is_let_go_and_cannot_lock_out_the_owner() -> None:
    """300 strangers connect and say nothing: at most ``max_unproven`` are held (a new one
    lets the oldest go), each for ``prove_s``; the owner still gets in and is served."""
    async with (
        rpc_server("k" * 64, max_unproven=16, prove_s=2.0) as port,
        raw_peers(port, FLOOD) as strangers,
    ):
        owner = await RpcClient.connect("127.0.0.1", port, secret="k" * 64, timeout=30)
        try:
            assert await owner.call("ping", timeout=30) == {"method": "ping"}
        finally:
            await owner.close()
        # every stranger is let go: by eviction, or when its time to prove runs out
        gone = await asyncio.gather(*(_drained(r) for r, _ in strangers))
        assert all(gone), f"{gone.count(False)} strangers still held"


async def _drained(reader: asyncio.StreamReader, timeout: float = 60.0) -> bool:
    """Whether the server hangs up on this peer (closes, or resets) within ``timeout`` s."""
    try:
        async with asyncio.timeout(timeout):
            while await reader.read(1 << 16):
                pass
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return True


async def test_unfinished_lines_from_strangers_hold_almost_nothing() -> None:
    """A stranger's line is at most ``max_unproven_line`` bytes before it is refused: 32
    peers streaming 1 MiB without a newline are each cut off, and the owner is served."""
    async with rpc_server("k" * 64) as port:

        async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
            with contextlib.suppress(ConnectionError):
                writer.write(b"x" * (1 << 20))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(30):
                        await writer.drain()
            return await _drained(reader)

        async with raw_peers(port, 32) as peers:
            assert all(await asyncio.gather(*(flood(r, w) for r, w in peers)))
            owner = await RpcClient.connect("127.0.0.1", port, secret="k" * 64)
            try:
                assert await owner.call("ping") == {"method": "ping"}
            finally:
                await owner.close()


async def test_a_real_env_server_serves_its_session_and_refuses_a_stranger() -> None:
    """The env server a launcher starts: this session's client runs an episode; a client
    holding another secret is refused before ``start`` (no episode, no slot token)."""
    async with env_server() as srv:
        url = srv.info["url"]
        client = await ControlClient.connect(Runtime(url))
        try:
            run = await client.start(_counter_task())
            assert run.robot_token
            await client.cancel(run)
        finally:
            await client.close()
        with pytest.raises(ControlError, match="refused this session"):
            await ControlClient.connect(Runtime(url, {"token": "f" * 64}))


def _counter_task() -> Any:
    from pytest_hud.runtime.task import Task

    return Task("counter", "count", {"seed": 0})


#: where a session takes the token of an env server it did not start (never its command line)
RUNTIME_TOKEN_ENV = "PYTEST_HUD_RUNTIME_TOKEN"
BY_HAND = """
import pytest
from pytest_hud import Task

@pytest.mark.hud(tasks=[Task("counter", "count", {"seed": 1})])
def test_count(hud_result):
    pass
"""


def _records(folder: Path) -> dict[str, str]:
    """Every file a session wrote under ``folder`` (results, ledger, reports), by name."""
    return {
        str(p.relative_to(folder)): p.read_text(errors="replace")
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in (".json", ".jsonl", ".html", ".xml", ".log", ".txt")
    }


async def test_serve_by_hand_keeps_its_token_out_of_command_lines_and_records(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 52 #1: ``python -m pytest_hud.serve`` started by hand printed
    ``--hud-runtime=tcp://...?token=T``, so T went into pytest's command line (``ps``), the
    results JSON (``runtime``, ``provenance.command``) and the ledger (the run record and
    every episode's ``repro``). Now it prints the bare url and keeps T in a file of the
    user's own (0600 in a 0700 folder), which a session on this host reads; from elsewhere
    T is given in ``$PYTEST_HUD_RUNTIME_TOKEN``. No command line and no record holds it, a
    url still carrying ``?token=`` is redacted from every record, and a wrong token is
    refused with the fix, as ERROR rows (infrastructure), not FAILs."""
    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private))  # the login's folder, here and in pytest
    monkeypatch.delenv(RUNTIME_TOKEN_ENV, raising=False)
    env = {k: v for k, v in child_env().items() if k != "PYTEST_HUD_SECRET"}
    argv = [sys.executable, "-m", "pytest_hud.serve", str(COUNTER), "--lifeline"]
    child = await Child.spawn(
        argv, announce=SERVER_ANNOUNCE, timeout=120, what="env server", env=env
    )
    try:
        printed = await _stderr_line(child, "--hud-runtime=")
        runtime = printed.split("--hud-runtime=", 1)[1].split()[0]
        assert "token" not in runtime, f"the printed command line carries the secret: {printed}"
        kept = Path(printed.split("its token is in ", 1)[1].split(",", 1)[0])
        token = kept.read_text().strip()
        assert len(token) == 64 and token not in printed and token != session_secret()
        assert kept.is_relative_to(private) and stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
        pytester.makepyfile(test_by_hand=BY_HAND)
        records = ("--hud-results=r.json", "--html=report.html", "--junitxml=junit.xml")
        ok = pytester.runpytest_subprocess(f"--hud-runtime={runtime}", "--hud-agent=zero", *records)
        ok.assert_outcomes(passed=1)
        wrote = _records(pytester.path)
        assert {"r.json", "r.ledger.jsonl", "report.html", "junit.xml"} <= set(wrote)
        leaked = [name for name, text in wrote.items() if token in text]
        assert not leaked and token not in ok.stdout.str() + ok.stderr.str(), leaked
        doc = json.loads(wrote["r.json"])
        assert doc["runtime"] == runtime and runtime in doc["provenance"]["command"]
        # a url that still carries ?token= (the old way) runs; no record keeps the token
        for name in wrote:
            (pytester.path / name).unlink()
        old = pytester.runpytest_subprocess(
            f"--hud-runtime={runtime}?token={token}", "--hud-agent=zero", *records
        )
        old.assert_outcomes(passed=1)
        wrote = _records(pytester.path)
        assert not [name for name, text in wrote.items() if token in text]
        assert json.loads(wrote["r.json"])["runtime"] == runtime
        # from elsewhere the token is in the environment; a wrong one is refused with the fix
        monkeypatch.setenv(RUNTIME_TOKEN_ENV, "0" * 64)
        refused = pytester.runpytest_subprocess(f"--hud-runtime={runtime}", "--hud-agent=zero")
        refused.assert_outcomes(errors=1)
        refused.stdout.fnmatch_lines([f"*refused this session*{RUNTIME_TOKEN_ENV}*"])
        monkeypatch.setenv(RUNTIME_TOKEN_ENV, token)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "elsewhere"))  # no token file
        pytester.runpytest_subprocess(
            f"--hud-runtime={runtime}", "--hud-agent=zero"
        ).assert_outcomes(passed=1)
        assert token not in child.log_tail(200)
    finally:
        await child.terminate()
    assert not kept.exists()  # the server removes its token file when it stops


SCANS_ARGV = """
import os
from pathlib import Path

import pytest
from pendulum import swing_up

from pytest_hud.plumbing.auth import derive


def holding(needle):
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:  # gone meanwhile
            continue
        if needle.encode() in argv:
            found.append(argv[:200])
    return found


@pytest.mark.hud(tasks=[swing_up.task(seed=s) for s in range(2)])
def test_swing_up(hud_result):
    secret = os.environ["PYTEST_HUD_SECRET"]
    assert holding("--hud-runtime=subprocess")  # the scan sees this session's own argv
    assert not holding(secret) and not holding(derive(secret, "bridge"))
"""


def test_the_sessions_secret_and_keys_are_in_no_command_line_record_or_output(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 52: no secret in argv, results, ledgers, reports or logs. A session under -n 2
    with env servers in subprocesses: while its rollouts run, no process's command line
    holds the session's secret or the bridge key derived from it, and neither is in any
    file it wrote (results, ledger, html, JUnit) nor in its output."""
    import secrets

    from pytest_hud.plumbing.auth import SECRET_ENV, derive

    secret = secrets.token_hex(32)
    monkeypatch.setenv(SECRET_ENV, secret)  # the session inherits it, as a launcher's would
    pytester.copy_example(str(ROOT / "examples" / "envs" / "pendulum.py"))
    pytester.makepyfile(test_scan=SCANS_ARGV)
    records = ("--hud-results=r.json", "--html=report.html", "--junitxml=junit.xml")
    done = pytester.runpytest_subprocess(
        "-n", "2", "--hud-runtime=subprocess", "--hud-agent=zero", *records
    )
    done.assert_outcomes(passed=2)
    wrote = _records(pytester.path)
    assert {"r.json", "r.ledger.jsonl", "report.html", "junit.xml"} <= set(wrote)
    output = done.stdout.str() + done.stderr.str()
    for needle in (secret, derive(secret, "bridge")):
        assert not [name for name, text in wrote.items() if needle in text]
        assert needle not in output


async def test_a_policy_server_keeps_the_token_it_made_out_of_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 52 (secrets never in logs): ``policy-server --token`` with no
    ``$PYTEST_HUD_POLICY_TOKEN`` printed the token it made on stderr, which a terminal's
    scrollback or a redirected log keeps. Now it keeps it in a file of the user's own (0600
    in a 0700 folder) and prints that path; ``--hud-agent=openpi:HOST:PORT`` on this host
    reads it, a client without it is refused (403), and the file goes when the server
    stops."""
    from pytest_hud.robot.agent.policy_server import ANNOUNCE as POLICY_ANNOUNCE
    from pytest_hud.robot.agent.registry import load_agent

    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private))  # the login's folder, here and there
    monkeypatch.delenv("PYTEST_HUD_POLICY_TOKEN", raising=False)
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(COUNTER_CONTRACT))
    argv = [sys.executable, "-m", "pytest_hud", "policy-server", "--agent=zero", "--port=0",
            "--token", f"--contract={contract}"]  # fmt: skip
    child = await Child.spawn(argv, announce=POLICY_ANNOUNCE, timeout=120, what="policy server")
    try:
        url = child.info["url"]
        printed = await _stderr_line(child, "its token is in ")
        kept = Path(printed.split("its token is in ", 1)[1].split(",", 1)[0])
        token = kept.read_text().strip()
        assert len(token) == 64 and token not in child.log_tail(200), printed
        assert kept.is_relative_to(private) and stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(url, open_timeout=30)
        assert refused.value.response.status_code == 403
        model = load_agent(f"openpi:127.0.0.1:{url.rsplit(':', 1)[1]}").model
        assert isinstance(model, RemoteModel)
        try:
            await model.connect()
            chunk = await model.ainfer({"state": np.zeros(3, np.float32)})
            assert np.asarray(chunk).shape[-1] == 2
        finally:
            await model.aclose()
    finally:
        await child.terminate()
    assert not kept.exists()  # the server removes its token file when it stops


async def _stderr_line(child: Child, needle: str, timeout: float = 60.0) -> str:
    async with asyncio.timeout(timeout):
        while True:
            for line in child.log_tail(200).splitlines():
                if needle in line:
                    return line
            await asyncio.sleep(0.1)


# -- the sim: its control port and its bridge --------------------------------------------------
async def test_the_sims_control_port_refuses_strangers_and_grades_only_with_a_token() -> None:
    """A spawned sim's control port wants the secret like an env server's; and its owner
    cannot grade or free a slot without the slot's token (on a one-slot sim ``None`` used
    to mean "the" slot, so anyone's ``result`` ended the real agent's episode)."""
    endpoint = RobotEndpoint(CounterSim)
    await endpoint.start()
    try:
        control = endpoint._child.info["control"]  # type: ignore[union-attr]
        host, port = control.removeprefix("tcp://").rsplit(":", 1)
        with pytest.raises(AuthError):
            await RpcClient.connect(host, int(port), secret="0" * 64)
        owner = await RpcClient.connect(host, int(port), secret=session_secret())
        try:
            grant = await owner.call("reset", seed=2)
            with pytest.raises(Exception, match="result needs the slot token"):
                await owner.call("result")
            slots = await owner.call("slots")
            assert slots[grant["slot"]]["state"] == "claimed"  # not graded, not freed
            assert "score" in await owner.call("result", token=grant["token"])
        finally:
            await owner.close()
    finally:
        await endpoint.stop()


async def test_the_bridge_refuses_a_client_without_its_key_before_the_websocket_opens() -> None:
    """A stranger dialling the bridge's port without the key gets HTTP 403 and no socket
    (it cannot hold a connection for the claim window); past the connection cap, 503. The
    url the env server hands out carries the key, and works."""
    endpoint = RobotEndpoint(CounterSim)
    await endpoint.start()
    try:
        url = endpoint.url
        assert "?key=" in url and derive(session_secret(), "bridge") in url
        bare = url.split("/?", 1)[0]
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(bare, open_timeout=30)
        assert refused.value.response.status_code == 403
        assert b"Traceback" not in (refused.value.response.body or b"")
        async with websockets.connect(url, open_timeout=30, max_size=None) as ws:
            meta = unpack(await ws.recv())
            assert meta["protocol"] == "openpi/0"
    finally:
        await endpoint.stop()


async def test_a_flood_of_keyless_connections_leaves_the_bridge_serving_its_agent() -> None:
    endpoint = RobotEndpoint(CounterSim)
    await endpoint.start()
    try:
        bare = endpoint.url.split("/?", 1)[0]

        async def stranger() -> int:
            try:
                async with websockets.connect(bare, open_timeout=60):
                    return 101
            except websockets.InvalidStatus as exc:
                return exc.response.status_code

        codes = await asyncio.gather(*(stranger() for _ in range(FLOOD)))
        assert set(codes) == {403}, set(codes)
        async with websockets.connect(endpoint.url, open_timeout=30, max_size=None) as ws:
            assert unpack(await ws.recv())["protocol"] == "openpi/0"
    finally:
        await endpoint.stop()


# -- the policy server ---------------------------------------------------------------------
async def test_a_policy_server_with_a_token_refuses_clients_without_it() -> None:
    """``token=``: a client without it gets 403 before the WebSocket opens; with it
    (openpi-client's ``api_key``: an ``Authorization: Api-Key`` header) it is served."""
    server = PolicyServer(ZeroModel(), contract=COUNTER_CONTRACT, token="p" * 64)
    async with server:
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(server.url, open_timeout=30)
        assert refused.value.response.status_code == 403
        model = RemoteModel(server.url, api_key="p" * 64)
        try:
            await model.connect()
            chunk = await model.ainfer({"state": np.zeros(3, np.float32)})
            assert np.asarray(chunk).shape[-1] == 2
        finally:
            await model.aclose()


async def test_a_policy_server_without_a_token_tells_a_failing_client_no_traceback() -> None:
    """Without a token anyone on the host may be the client: a request that fails is
    answered with one line naming the error, not the server's traceback (its log has it)."""
    async with PolicyServer(ZeroModel(), contract=COUNTER_CONTRACT) as server:
        async with websockets.connect(server.url, open_timeout=30, max_size=None) as ws:
            await ws.recv()  # metadata
            await ws.send(pack([1, 2, 3]))  # not a map
            reply = await ws.recv()
        assert isinstance(reply, str) and reply.startswith("policy server error: ValueError")
        assert "Traceback" not in reply and "File " not in reply


async def test_no_auth_serves_anyone_and_says_so_loudly(pytester: pytest.Pytester) -> None:
    """``python -m pytest_hud.serve --no-auth`` greets without a nonce, so a client with no
    secret is served, and it warns on stderr; ``pytest --hud-no-auth`` runs a session whose
    servers do the same, with one warning."""
    env = {k: v for k, v in child_env().items() if k != "PYTEST_HUD_SECRET"}
    argv = [sys.executable, "-m", "pytest_hud.serve", str(COUNTER), "--lifeline", "--no-auth"]
    child = await Child.spawn(
        argv, announce=SERVER_ANNOUNCE, timeout=120, what="env server", env=env
    )
    try:
        warning = await _stderr_line(child, "WARNING")
        assert "--no-auth" in warning and "admits anyone" in warning
        host, port = child.info["url"].removeprefix("tcp://").rsplit(":", 1)
        anyone = await RpcClient.connect(host, int(port), secret=None)
        try:
            assert (await anyone.call("ping"))["ok"]
        finally:
            await anyone.close()
    finally:
        await child.terminate()
    pytester.makepyfile(
        test_open=f"""
        import sys
        import pytest
        from pytest_hud import Task
        sys.path.insert(0, {str(COUNTER.parent.parent)!r})
        import envs.counter_env  # noqa: F401

        @pytest.mark.hud(tasks=[Task("counter", "count", {{"seed": 1}})])
        def test_count(hud_result):
            pass
        """
    )
    result = pytester.runpytest_subprocess("--hud-no-auth", "--hud-agent=zero")
    result.assert_outcomes(passed=1)
    assert result.stderr.str().count("admits anyone") == 1


class CappedCounterSim(CounterSim):
    max_connections = 4


async def test_past_its_connection_cap_the_bridge_answers_503_and_serves_again_after() -> None:
    """Issue 39 #7: 1,500 unclaimed connections held 1,509 fds of a sim. Connections past
    ``max_connections`` (even keyed ones) are refused before the WebSocket opens; once
    some close, a new one is served."""
    endpoint = RobotEndpoint(CappedCounterSim)
    await endpoint.start()
    try:
        held = [await websockets.connect(endpoint.url, open_timeout=30) for _ in range(4)]
        try:
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(endpoint.url, open_timeout=30)
            assert refused.value.response.status_code == 503
        finally:
            for ws in held:
                await ws.close()
        async with asyncio.timeout(60):
            while True:  # the bridge notices the closes as its handlers end
                try:
                    async with websockets.connect(endpoint.url, open_timeout=30) as ws:
                        assert unpack(await ws.recv())["protocol"] == "openpi/0"
                        break
                except websockets.InvalidStatus:
                    await asyncio.sleep(0.1)
    finally:
        await endpoint.stop()


async def test_a_policy_server_with_a_token_serves_its_client_through_a_flood() -> None:
    """300 connections without the token are each refused (403) and hold nothing; the
    client with the token is served while they arrive."""
    server = PolicyServer(ZeroModel(), contract=COUNTER_CONTRACT, token="p" * 64)
    async with server:

        async def stranger() -> int:
            try:
                async with websockets.connect(server.url, open_timeout=60):
                    return 101
            except websockets.InvalidStatus as exc:
                return exc.response.status_code

        model = RemoteModel(server.url, api_key="p" * 64)
        try:
            await model.connect()
            flood = asyncio.gather(*(stranger() for _ in range(FLOOD)))
            chunk = await model.ainfer({"state": np.zeros(3, np.float32)})
            codes = await flood
        finally:
            await model.aclose()
        assert set(codes) == {403} and np.asarray(chunk).shape[-1] == 2
        assert server.held() == 0  # nobody left holding a connection
