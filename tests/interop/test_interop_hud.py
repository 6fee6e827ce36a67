"""Interop with the real HUD SDK (``hud[robot]==0.6.21``) over openpi/0, both directions.

The HUD side runs in its own venv (see ``hud_python`` in conftest.py) through two scripts in
``tests/helpers/peers``: ``hud_agent.py`` drives a bridge with HUD's ``RobotClient``, and
``hud_serve.py`` serves Pendulum-v1 with HUD's ``GymBridge`` behind HUD's ``RobotEndpoint``.

1. HUD's agent against our ``RobotEndpoint(GymBridge)``, single and vectorized.
2. Our ``RobotClient`` against HUD's bridge, single and vectorized.
3. Frames: what each side puts on the wire decodes to the same arrays on the other side,
   and each codec re-encodes the other's frames byte for byte.

Every wait is bounded and every subprocess is reaped (killed if need be).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.server import serve as ws_serve

from pytest_hud.robot import Contract, GymBridge, RobotClient, RobotEndpoint
from pytest_hud.robot.wire.codec import pack, unpack

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

INTEROP = Path(__file__).resolve().parents[1] / "helpers" / "peers"
HUD_AGENT = INTEROP / "hud_agent.py"
HUD_SERVE = INTEROP / "hud_serve.py"
PENDULUM = "Pendulum-v1"
PENDULUM_STEPS = 200  # Pendulum-v1's TimeLimit: terminated (truncated) on the 200th step
MAX_STEPS = 500  # the agents' cap: well past the time limit, so a missed signal shows
SEED = 1
WAIT = 180.0  # bound on any one subprocess wait (start-up included); generous for CI


def _hud_env() -> dict[str, str]:
    """The HUD venv must not see our venv's paths (it pins numpy<2; we run numpy 2)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.pop("PYTEST_HUD_LIFELINE", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _observation_names(contract: dict[str, Any]) -> list[str]:
    return [n for n, f in contract["features"].items() if f["role"] == "observation"]


# -- hud_agent.py ----------------------------------------------------------------------
async def run_hud_agent(
    python: Path,
    *args: str,
    capability: dict[str, Any] | None = None,
    token: str | None = None,
    timeout: float = WAIT,
) -> dict[str, Any]:
    """Run hud_agent.py to completion (killed after ``timeout``); its JSON summary."""
    cmd = [str(python), str(HUD_AGENT), *args]
    if token is not None:
        cmd.append(f"--token={token}")  # one argv word: our tokens may start with "-"
    stdin = None
    if capability is not None:
        cmd += ["--capability", "-"]  # via stdin: the same path a shell pipe would use
        stdin = json.dumps(capability).encode()
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_hud_env(),
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        pytest.fail(f"hud_agent.py did not finish within {timeout} s: {cmd}")
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    lines = out.decode(errors="replace").strip().splitlines()
    summary = None
    with contextlib.suppress(IndexError, json.JSONDecodeError):
        summary = json.loads(lines[-1])
    if not isinstance(summary, dict):
        pytest.fail(
            f"hud_agent.py exited {proc.returncode} without a JSON summary\n"
            f"stdout:\n{out.decode(errors='replace')[-3000:]}\n"
            f"stderr:\n{err.decode(errors='replace')[-3000:]}"
        )
    if summary.get("error"):
        pytest.fail(
            f"HUD's RobotClient failed: {summary['error']}\n{summary.get('traceback', '')}\n"
            f"(it got {summary.get('steps', 0)} steps in)\n"
            f"stderr:\n{err.decode(errors='replace')[-3000:]}"
        )
    return summary


# -- hud_serve.py ----------------------------------------------------------------------
class HudServe:
    """hud_serve.py as a subprocess: its ``HUD_SERVE {json}`` events arrive on a queue."""

    PREFIX = "HUD_SERVE "

    def __init__(self, python: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(HUD_SERVE), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env=_hud_env(),
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.sim_pid: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                if line.startswith(self.PREFIX):
                    event = json.loads(line[len(self.PREFIX) :])
                    if event.get("event") == "ready":
                        self.sim_pid = event.get("sim_pid")
                    self.events.put(event)
        finally:
            self.events.put(None)  # EOF

    def log(self, lines: int = 60) -> str:
        return "\n".join(self.lines[-lines:]) or "(no output)"

    def expect(self, event: str, timeout: float = WAIT) -> dict[str, Any]:
        """The next event named ``event``; fails on an error event, EOF or timeout."""
        try:
            got = self.events.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"hud_serve.py sent no {event!r} event within {timeout} s:\n{self.log()}")
        if got is None:
            pytest.fail(
                f"hud_serve.py exited ({self.proc.poll()}) before a {event!r} event:\n{self.log()}"
            )
        if got["event"] != event:
            pytest.fail(f"hud_serve.py sent {got} while {event!r} was due:\n{self.log()}")
        return got

    async def aexpect(self, event: str, timeout: float = WAIT) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self.expect, event, timeout)

    def command(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self, timeout: float = 30.0) -> None:
        """Close stdin (hud_serve.py stops its sim and exits); kill whatever is left."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        if self.sim_pid:  # the sim runs in its own session; it exits with us, but be sure
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.sim_pid, signal.SIGKILL)
        self._reader.join(10)


@pytest.fixture
def hud_serve(hud_python: Path) -> Iterator[Any]:
    """Start hud_serve.py with the given args; every one started is reaped at teardown."""
    started: list[HudServe] = []

    def start(*args: str) -> HudServe:
        serve = HudServe(hud_python, *args)
        started.append(serve)
        return serve

    try:
        yield start
    finally:
        for serve in started:
            serve.close()


# -- 1. HUD's agent -> our bridge ------------------------------------------------------
async def test_hud_agent_drives_our_gym_bridge(hud_python: Path) -> None:
    async with RobotEndpoint(GymBridge, kwargs=dict(target=PENDULUM)) as ep:
        episode = await ep.reset(seed=SEED)
        capability = await ep.capability()
        summary = await run_hud_agent(
            hud_python,
            "--policy",
            "zero",
            "--max-steps",
            str(MAX_STEPS),
            capability=capability,
            token=episode["token"],
        )
        grade = await ep.result(episode["token"])

    contract = capability["params"]["contract"]
    names = _observation_names(contract)
    assert summary["first_terminated"] is False
    assert summary["terminated"] is True
    assert summary["steps"] == PENDULUM_STEPS
    # HUD's RobotClient lifts "terminated" and "reward" out; the rest is our contract's keys.
    assert summary["observation_keys"] == names
    assert list(summary["observation_space"]) == names
    assert summary["action_size"] == Contract.from_dict(contract).spaces().action_feature.size
    for name in names:
        feature = contract["features"][name]
        assert summary["observation_specs"][name] == [
            {"type": "ndarray", "dtype": np.dtype(feature["dtype"]).str, "shape": feature["shape"]}
        ]
    assert summary["reward_specs"], "HUD's client saw no per-step reward"
    assert grade["steps"] == PENDULUM_STEPS
    # The wire carries each reward as float32; the bridge sums the env's float64 rewards.
    assert summary["total_reward"] == pytest.approx(grade["total_reward"], rel=1e-6)


async def test_hud_agents_drive_our_vectorized_bridge(hud_python: Path) -> None:
    """Three HUD agents on three slots of a 4-copy sim; the unclaimed slot is held."""
    agents = 3
    async with RobotEndpoint(GymBridge, kwargs=dict(target=PENDULUM, num_envs=4)) as ep:
        assert ep.num_envs == 4
        episodes = [await ep.reset(seed=SEED) for _ in range(agents)]
        tokens = [e["token"] for e in episodes]
        assert len(set(tokens)) == agents
        capability = await ep.capability()
        summaries = await asyncio.gather(
            *(
                run_hud_agent(
                    hud_python,
                    "--policy",
                    "random",
                    "--seed",
                    str(i),
                    "--max-steps",
                    str(MAX_STEPS),
                    capability=capability,
                    token=token,
                )
                for i, token in enumerate(tokens)
            )
        )
        grades = [await ep.result(token) for token in tokens]

    names = _observation_names(capability["params"]["contract"])
    for summary, grade in zip(summaries, grades, strict=True):
        assert summary["terminated"] is True
        assert summary["steps"] == PENDULUM_STEPS
        assert summary["observation_keys"] == names
        assert grade["steps"] == PENDULUM_STEPS
        assert summary["total_reward"] == pytest.approx(grade["total_reward"], rel=1e-6)
    # Different random actions per slot: each agent saw its own slot's row.
    finals = {json.dumps(s["last_observation"]) for s in summaries}
    assert len(finals) == agents


# -- 2. our RobotClient -> HUD's bridge ----------------------------------------------------
async def _drive(client: RobotClient, action_size: int) -> dict[str, Any]:
    """Zero actions until terminated (capped); what our client saw."""
    obs = await client.get_observation()
    first = obs
    seen: set[tuple[str, str, tuple[int, ...]]] = set()
    reward_types: set[str] = set()
    steps, total = 0, 0.0
    while not obs["terminated"] and steps < MAX_STEPS:
        obs = await client.step(np.zeros(action_size, np.float32))
        steps += 1
        for key, value in obs["data"].items():
            arr = np.asarray(value)
            seen.add((key, arr.dtype.str, arr.shape))
        reward_types.add(type(obs["reward"]).__name__)
        total += float(obs["reward"])
    return {
        "first": first,
        "last": obs,
        "steps": steps,
        "seen": seen,
        "reward_types": reward_types,
        "total": total,
    }


async def test_our_client_drives_hud_gym_bridge(hud_serve: Any) -> None:
    serve = hud_serve("--env", PENDULUM, "--seed", str(SEED))
    ready = await serve.aexpect("ready")
    capability, (token,) = ready["capability"], ready["tokens"]
    assert capability["protocol"] == "openpi/0"
    contract = capability["params"]["contract"]
    client = await RobotClient.connect(
        capability["url"], token=token, contract=contract, open_timeout=60, timeout=60
    )
    try:
        spaces = client.spaces()
        assert list(spaces.observation) == _observation_names(contract) == ["obs"]
        size = spaces.action_feature.size
        assert size == 1
        run = await _drive(client, size)
    finally:
        await client.close()

    assert run["first"]["terminated"] is False
    assert run["last"]["terminated"] is True
    assert run["steps"] == PENDULUM_STEPS
    assert run["seen"] == {("obs", "<f4", (3,))}
    assert run["reward_types"] == {"float32"}  # HUD sends the reward as a numpy scalar
    serve.command(f"result {token}")
    result = await serve.aexpect("result")
    assert result["token"] == token
    grade = result["grade"]
    assert set(grade) >= {"score", "success", "total_reward"}
    assert grade["success"] is False
    assert grade["total_reward"] == pytest.approx(run["total"], rel=1e-9)


async def test_our_clients_drive_hud_vectorized_bridge(hud_serve: Any) -> None:
    serve = hud_serve("--env", PENDULUM, "--num-envs", "2", "--seed", str(SEED))
    ready = await serve.aexpect("ready")
    capability, tokens = ready["capability"], ready["tokens"]
    assert len(set(tokens)) == 2

    async def one(token: str) -> dict[str, Any]:
        # The capability dict form: the client takes the contract from its params.
        client = await RobotClient.connect(capability, token=token, open_timeout=60, timeout=60)
        try:
            return await _drive(client, client.spaces().action_feature.size)
        finally:
            await client.close()

    runs = await asyncio.gather(*(one(t) for t in tokens))
    for token, run in zip(tokens, runs, strict=True):
        assert run["last"]["terminated"] is True
        assert run["steps"] == PENDULUM_STEPS
        assert run["seen"] == {("obs", "<f4", (3,))}
        serve.command(f"result {token}")
        result = await serve.aexpect("result")
        assert result["token"] == token
        assert result["grade"]["total_reward"] == pytest.approx(run["total"], rel=1e-9)


# -- 3. frames, byte for byte ------------------------------------------------------------
async def _first_frames(url: str, token: str) -> tuple[bytes, bytes]:
    """The metadata frame and the first observation frame a bridge sends, raw."""
    async with (
        asyncio.timeout(60),
        ws_connect(url, max_size=None, ping_interval=None, open_timeout=30) as ws,
    ):
        meta = await ws.recv()
        await ws.send(pack({"claim": token}))
        obs = await ws.recv()
    assert isinstance(meta, bytes), f"text frame instead of metadata: {meta!r}"
    assert isinstance(obs, bytes), f"text frame instead of an observation: {obs!r}"
    return meta, obs


async def _our_client_frames(token: str, actions: list[Any]) -> list[bytes]:
    """The claim and action frames our RobotClient puts on the wire, seen by a stub bridge."""
    got: list[bytes] = []
    reply = pack({"obs": np.zeros(3, np.float32), "terminated": False})

    async def bridge(ws: Any) -> None:
        await ws.send(pack({"claim_required": True}))
        for _ in range(len(actions) + 1):
            got.append(await ws.recv())
            await ws.send(reply)

    async with asyncio.timeout(60), ws_serve(bridge, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        client = await RobotClient.connect(f"ws://127.0.0.1:{port}", token=token, timeout=30)
        try:
            await client.get_observation()
            for action in actions:
                await client.step(action)
        finally:
            await client.close()
    return got


async def test_frames_match_byte_for_byte(hud_python: Path, hud_serve: Any) -> None:
    serve = hud_serve("--env", PENDULUM, "--seed", str(SEED))
    async with RobotEndpoint(GymBridge, kwargs=dict(target=PENDULUM)) as ep:
        ours_token = (await ep.reset(seed=SEED))["token"]
        ours_meta, ours_obs = await _first_frames(ep.url, ours_token)
        await ep.result(ours_token)
    ready = await serve.aexpect("ready")
    hud_token = ready["tokens"][0]
    hud_meta, hud_obs = await _first_frames(ready["url"], hud_token)

    # HUD's frames through our codec: the expected content, and re-encoded byte for byte.
    hud_meta_v, hud_obs_v = unpack(hud_meta), unpack(hud_obs)
    assert hud_meta_v == {"claim_required": True}
    assert list(hud_obs_v) == ["obs", "reward", "terminated"]
    assert isinstance(hud_obs_v["reward"], np.float32)  # an npgeneric on HUD's wire
    assert hud_obs_v["terminated"] is False
    assert pack(hud_meta_v) == hud_meta
    assert pack(hud_obs_v) == hud_obs

    # Our frames through our codec; the same reset state (same seed) as HUD's, same array type.
    ours_meta_v, ours_obs_v = unpack(ours_meta), unpack(ours_obs)
    assert ours_meta_v["claim_required"] is True
    ours_state, hud_state = ours_obs_v["observation/state"], hud_obs_v["obs"]
    assert ours_state.dtype == hud_state.dtype == np.dtype("<f4")
    assert ours_state.shape == hud_state.shape == (3,)
    np.testing.assert_array_equal(ours_state, hud_state)
    assert ours_obs_v["terminated"] is False
    assert float(ours_obs_v["reward"]) == float(hud_obs_v["reward"]) == 0.0

    # The other direction: openpi's msgpack_numpy (what HUD decodes with) on our frames and
    # on HUD's; and the action/claim frames HUD's RobotClient would send.
    actions: list[Any] = [[0.5], [0.1, -0.2, 0.3], [[1.0, -2.0]], [1, 2]]
    summary = await run_hud_agent(
        hud_python,
        *(arg for a in actions for arg in ("--pack-action", json.dumps(a))),
        *(arg for h in (ours_meta, ours_obs, hud_obs) for arg in ("--decode-hex", h.hex())),
        token=ours_token,
    )
    dec_meta, dec_obs, dec_hud_obs = summary["decoded"]
    assert dec_meta["repacked_hex"] == ours_meta.hex()
    assert dec_obs["repacked_hex"] == ours_obs.hex()
    assert dec_hud_obs["repacked_hex"] == hud_obs.hex()
    assert dec_meta["value"]["claim_required"] is True
    assert dec_obs["value"]["observation/state"] == {
        "__ndarray__": {"dtype": "<f4", "shape": [3], "values": hud_state.tolist()}
    }
    assert dec_obs["value"]["terminated"] is False

    hud_frames = [bytes.fromhex(summary["claim_frame_hex"])]
    hud_frames += [bytes.fromhex(p["hex"]) for p in summary["packed_actions"]]
    for a, frame in zip(actions, hud_frames[1:], strict=True):
        assert pack({"actions": np.asarray(a, dtype=np.float32)}) == frame, a
    assert hud_frames[0] == pack({"claim": ours_token})
    # And what our RobotClient really sends: the same bytes as HUD's RobotClient.
    assert await _our_client_frames(ours_token, actions) == hud_frames
