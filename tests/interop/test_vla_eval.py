"""vla-eval interop (issue 27) with vla-eval's own classes on both sides.

The env is a real vla-eval ``StepBenchmark`` (CartPole,
tests/helpers/vla_eval_peer/cartpole_bench.py) served by ``env.vla_eval``; the model server
is a real ``PredictModelServer`` subclass in a process of its own on 127.0.0.1
(tests/helpers/vla_eval_peer/controller_server.py), running the same scripted controller a
native agent runs. Real pytest runs (pytester, subprocesses).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import require

from pytest_hud.runtime.ports import free_port

HAVE_VLA_EVAL = importlib.util.find_spec("vla_eval") is not None
HERE = Path(__file__).resolve().parents[1] / "helpers" / "vla_eval_peer"
sys.path.insert(0, str(HERE))  # the helpers (a folder named vla_eval is not a package here)
pytestmark = pytest.mark.vla_eval


@pytest.fixture(autouse=True)
def _need_vla_eval() -> None:
    require(HAVE_VLA_EVAL, "vla-eval", "pip install 'pytest-hud[vla-eval]' (scripts/setup --all)")


TESTS = """
import pytest
from cartpole_env import ROWS

@pytest.mark.hud(tasks=ROWS)
def test_cartpole(hud_result):
    assert hud_result.success, hud_result.summary()
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(HERE), path) if p))
    pytester.makepyfile(test_cartpole=TESTS)
    pytester.makeconftest("import cartpole_env  # noqa: F401\n")
    return pytester


def run(pytester: pytest.Pytester, agent: str, *args: str) -> tuple[Any, dict[str, Any]]:
    out = pytester.path / f"results-{len(list(pytester.path.glob('results-*')))}.json"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--hud-agent={agent}",
        f"--hud-results={out}",
        *args,
        timeout=240,
    )
    rows = {r["key"]: r for r in json.loads(out.read_text())["rollouts"]} if out.exists() else {}
    return result, rows


def outcomes(rows: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {
        k: (r["success"], r["total_reward"], r["steps"], r["error_type"]) for k, r in rows.items()
    }


# -- the codec, against vla-eval's own ------------------------------------------------
def test_our_messages_decode_with_vla_evals_codec_and_theirs_with_ours() -> None:
    from vla_eval.protocol import messages as theirs
    from vla_eval.protocol.numpy_codec import set_image_format

    from pytest_hud.interop.vla_eval.codec import pack_message, unpack_message

    obs = {
        "images": {"top": np.arange(48, dtype=np.uint8).reshape(4, 4, 3)},
        "states": np.array([0.5, -1.0], np.float32),
        "task_description": "balance",
    }
    msg = theirs.unpack_message(pack_message("observation", obs, 7))
    assert msg.type is theirs.MessageType.OBSERVATION and msg.seq == 7
    np.testing.assert_array_equal(msg.payload["images"]["top"], obs["images"]["top"])
    assert msg.payload["states"].dtype == np.float32
    for fmt in ("png", "raw"):  # vla-eval's clients send PNG images by default
        set_image_format(fmt)
        try:
            data = theirs.pack_message(theirs.Message(theirs.MessageType.OBSERVATION, obs, seq=3))
        finally:
            set_image_format("png")
        ours = unpack_message(data)
        assert (ours.type, ours.seq, ours.payload["task_description"]) == (
            "observation",
            3,
            "balance",
        )
        np.testing.assert_array_equal(ours.payload["images"]["top"], obs["images"]["top"])
        np.testing.assert_array_equal(ours.payload["states"], obs["states"])


def test_a_frame_that_is_not_a_message_is_a_wire_error_naming_its_size() -> None:
    import msgpack

    from pytest_hud.interop.vla_eval.codec import VlaEvalWireError, unpack_message

    with pytest.raises(VlaEvalWireError, match=r"^not a msgpack message \(2 bytes\): \S"):
        unpack_message(b"\x92\x01")  # a two-item array cut after its first
    with pytest.raises(VlaEvalWireError, match="expected a msgpack map, got list"):
        unpack_message(msgpack.packb([1, 2]))


# -- the spec check --------------------------------------------------------------------
def test_spec_check_names_both_sides_and_tables_conventions() -> None:
    from vla_eval.specs import GRIPPER_CLOSE_NEG, GRIPPER_CLOSE_POS, IMAGE_RGB, POSITION_DELTA

    from pytest_hud.interop.vla_eval.specs import check_specs
    from pytest_hud.robot.contract import Contract

    contract = Contract.from_dict(
        {
            "features": {
                "images/agentview": {"role": "observation", "type": "rgb", "shape": [8, 8, 3]},
                "states": {"role": "observation", "shape": [8]},
                "action": {"role": "action", "shape": [4]},
            }
        }
    )
    hello = {
        "observation_spec": {
            "agentview": IMAGE_RGB.to_dict(),
            "wrist": IMAGE_RGB.to_dict(),
            "state": {"name": "state", "dims": 7, "format": "eef"},
        },
        "action_spec": {
            "position": POSITION_DELTA.to_dict(),
            "gripper": GRIPPER_CLOSE_POS.to_dict(),
        },
    }
    env = {"action_spec": {"gripper": GRIPPER_CLOSE_NEG.to_dict()}}
    found = check_specs(hello, contract.spaces(), env)
    text = "\n".join(found.errors)
    assert "2 camera(s) ['agentview', 'wrist']" in text and "images/agentview" in text
    assert "7-dim state" in text and "has 8" in text
    assert "4-dim actions (position 3, gripper 1)" not in text  # 3 + 1 == 4: fits
    assert found.warnings == [
        ("action", "gripper", "binary_close_positive", "binary_close_negative")
    ]
    assert "binary_close_negative" in found.warning_table("S")


# -- both directions in pytest runs ----------------------------------------------------
@pytest.mark.parametrize("workers", [None, "2"], ids=["n0", "n2"])
def test_a_vla_eval_server_passes_the_same_rows_as_the_native_agent(
    suite: pytest.Pytester, workers: str | None, tmp_path: Path
) -> None:
    """... over one connection per process, kept between its episodes as a vla-eval shard
    keeps its one."""
    from server_proc import controller_server, server_stats

    extra = ("-n", workers) if workers else ()
    native, want = run(suite, "cartpole_agents:balance", *extra)
    stats = tmp_path / "stats.json"
    with controller_server("--batch", "4", "--stats", str(stats)) as (port, proc):
        remote, got = run(suite, f"vla-eval:ws://127.0.0.1:{port}", *extra)
        seen = server_stats(proc, stats)
    # 4 episodes, one connection per process, and the preflight's episode on a loop of its own
    assert seen["connections"] == int(workers or 1) + 1, seen
    assert len(want) == 4, native.stdout.str()
    assert outcomes(got) == outcomes(want), remote.stdout.str()
    assert {r["success"] for r in got.values()} == {True, False}  # goal0 passes, goal1 fails
    assert all(r["error_type"] is None for r in got.values())
    remote.assert_outcomes(passed=2, failed=2)


def test_host_port_form_and_a_convention_difference_is_one_warning_table(
    suite: pytest.Pytester,
) -> None:
    from server_proc import controller_server

    with controller_server("--push-format", "binary_push_left") as (port, _):
        result, rows = run(suite, f"vla-eval:127.0.0.1:{port}")
    assert len(rows) == 4 and all(r["error_type"] is None for r in rows.values())
    out = result.stdout.str()
    assert "vla-eval conventions differ" in out and "binary_push_left" in out, out
    assert out.count("vla-eval conventions differ") == 1


@pytest.mark.parametrize("workers", [None, "2"], ids=["n0", "n2"])
def test_a_mismatched_server_fails_before_any_item(
    suite: pytest.Pytester, workers: str | None
) -> None:
    """Also under -n 2: the controller's preflight sees the env the conftest imports."""
    from server_proc import controller_server

    extra = ("-n", workers) if workers else ()
    with controller_server("--action-dims", "3") as (port, _):
        result, rows = run(suite, f"vla-eval:ws://127.0.0.1:{port}", *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert "3-dim actions" in err and "'action' has 1" in err and "vla-cartpole" in err, err
    assert not rows


def test_an_unreachable_server_is_one_usage_error(suite: pytest.Pytester) -> None:
    port = free_port()  # a port nobody listens on
    result, rows = run(suite, f"vla-eval:ws://127.0.0.1:{port}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"127.0.0.1:{port}" in result.stderr.str()
    assert not rows


def test_a_server_killed_mid_run_gives_error_rows_and_the_session_finishes(
    suite: pytest.Pytester,
) -> None:
    from server_proc import controller_server

    with controller_server("--die-after", "150") as (port, proc):
        result, rows = run(suite, f"vla-eval:ws://127.0.0.1:{port}")
        assert proc.wait(10) == 3  # it died where told to
    assert len(rows) == 4, result.stdout.str()
    done = [r for r in rows.values() if r["error_type"] is None]
    rest = [r for r in rows.values() if r["error_type"] is not None]
    assert len(done) == 1 and done[0]["steps"] == 100, outcomes(rows)
    assert all(r["error_type"] == "VlaEvalError" for r in rest), outcomes(rows)
    assert all(f"127.0.0.1:{port}" in r["error"] for r in rest)
    assert sum("went away mid-episode" in r["error"] for r in rest) == 1, [r["error"] for r in rest]
    out = result.stdout.str()
    assert "3 errors" in out or "errors: 3" in out, out
    assert result.ret == pytest.ExitCode.TESTS_FAILED


RECONNECTING = """
import pytest
from pytest_hud.interop.vla_eval.agent import VlaEvalAgent

@pytest.fixture(scope="session")
def hud_agent():
    return VlaEvalAgent("ws://127.0.0.1:{port}", retries=6, backoff=0.5)
"""


def test_a_server_back_within_the_backoff_resumes_the_episode(suite: pytest.Pytester) -> None:
    """The server dies mid-episode and a new one comes up on its port: the agent
    reconnects, restarts the episode there and resends the observation; every row
    ends as it does with the native agent."""
    import threading

    from server_proc import controller_server

    _, want = run(suite, "cartpole_agents:balance")
    port = free_port()
    suite.makeconftest("import cartpole_env  # noqa: F401\n" + RECONNECTING.format(port=port))
    revived: list[int | None] = []
    done = threading.Event()
    with controller_server("--port", str(port), "--die-after", "150") as (_, first):

        def revive() -> None:
            first.wait(120)
            with controller_server("--port", str(port)):
                revived.append(first.returncode)
                done.wait(240)  # serve until the run below is over

        thread = threading.Thread(target=revive, daemon=True)
        thread.start()
        try:
            result, got = run(suite, "zero")  # the conftest's hud_agent replaces --hud-agent
        finally:
            done.set()
            thread.join(30)
    assert revived == [3], "the first server did not die where told to"
    assert outcomes(got) == outcomes(want), result.stdout.str()


def test_a_kept_connection_the_server_dropped_between_episodes_is_replaced() -> None:
    """A connection kept between episodes carries the next one; if its server went away in
    between (here: restarted on the same port), the next episode opens a new connection and
    runs there, and its report counts the reconnect."""
    import asyncio

    from server_proc import controller_server

    from pytest_hud.interop.vla_eval.agent import VlaEvalModel
    from pytest_hud.interop.vla_eval.connection import VlaEvalSession

    port = free_port()
    obs = {"states": [0.0, 0.0, 0.05, 0.0], "task_description": "balance the pole"}

    async def episode(model: VlaEvalModel) -> tuple[Any, int, VlaEvalSession]:
        async def one() -> tuple[Any, int, VlaEvalSession]:
            session = await model.session()
            await session.start_episode({"name": "goal0"})
            actions = await session.act(obs)
            await session.end_episode({"metrics": {}, "steps": 1})
            await model.close_session()
            return np.asarray(actions), session.reconnects, session

        return await asyncio.create_task(one())  # a task of its own, as each rollout is

    async def main() -> None:
        model = VlaEvalModel(f"ws://127.0.0.1:{port}", retries=6, backoff=0.5)
        try:
            with controller_server("--port", str(port)):
                first, again = await episode(model), await episode(model)
            assert again[2] is first[2] and first[1] == again[1] == 0  # kept, not reopened
            with controller_server("--port", str(port)):
                after = await episode(model)
            assert after[2] is first[2] and after[1] == 1  # the kept session, redialled
            assert np.array_equal(after[0], first[0]) and np.array_equal(again[0], first[0])
        finally:
            await model.aclose()
        assert not model._idle and not model._sessions

    asyncio.run(main())


# -- rollouts in flight together, cameras and chunks, async benchmarks -----------------
def test_rollouts_in_flight_together_each_have_a_connection_and_match_serial(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two rollouts in flight over one 2-slot substrate: each has its own connection to the
    server (one batch serves two sessions), and every row ends as in a serial run."""
    from server_proc import controller_server, server_stats

    _, serial = run(suite, "cartpole_agents:balance")
    monkeypatch.setenv("VLA_NUM_ENVS", "2")
    stats = tmp_path / "stats.json"
    # a batch of 2 is dispatched once both sessions sent (or after 50 ms with one)
    with controller_server("--batch", "2", "--wait", "0.05", "--stats", str(stats)) as (
        port,
        proc,
    ):
        url = f"vla-eval:ws://127.0.0.1:{port}"
        result, got = run(suite, url, "--hud-concurrency=2", "--hud-shared=2")
        seen = server_stats(proc, stats)
    assert len(serial) == 4 and outcomes(got) == outcomes(serial), result.stdout.str()
    assert seen["sessions"] == 2, seen  # two connections' observations in one predict_batch
    assert seen["connections"] == 3, seen  # each slot's kept for its second episode; preflight
    assert seen["widths"].get("2", 0) >= 50, seen  # most ticks of the 2 x 2 rows: batched


@pytest.mark.parametrize(
    "how", [(), ("-n", "2"), ("--hud-concurrency=2", "--hud-shared=2")], ids=["n0", "n2", "c2"]
)
def test_a_benchmark_served_inline_gives_the_rows_it_gives_in_a_sim_process(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: tuple[str, ...]
) -> None:
    """``env.vla_eval(..., inline=True)``: the benchmark in the pytest process (as a vla-eval
    shard holds it), no sim process; the same rows as served from a sim process."""
    from server_proc import controller_server

    monkeypatch.setenv("VLA_NUM_ENVS", "2" if "--hud-shared=2" in how else "1")
    with controller_server("--batch", "2") as (port, _):
        url = f"vla-eval:ws://127.0.0.1:{port}"
        _, want = run(suite, url, *how)
        monkeypatch.setenv("VLA_INLINE", "1")
        suite.makeconftest(INLINE_CHECK)
        result, got = run(suite, url, *how)
    assert len(want) == 4 and outcomes(got) == outcomes(want), result.stdout.str()
    assert {r["success"] for r in got.values()} == {True, False}
    result.assert_outcomes(passed=2, failed=2)


#: an endpoint that would spawn a sim process fails its row instead
INLINE_CHECK = """
import cartpole_env  # noqa: F401
from pytest_hud.robot.sim.endpoint import RobotEndpoint

async def _no_sim_process(self):
    raise AssertionError("an inline benchmark spawned a sim process")

RobotEndpoint._spawn = _no_sim_process
"""


CHUNKED = """
import pytest
from cartpole_agents import ENSEMBLE
from pytest_hud.interop.vla_eval.agent import VlaEvalAgent
from pytest_hud.robot.agent.ensembler import Ensembler

@pytest.fixture(scope="session")
def hud_agent():
    return VlaEvalAgent("ws://127.0.0.1:{port}", ensembler=Ensembler(**ENSEMBLE))
"""


def test_a_camera_only_server_returning_chunks_runs_through_the_ensembler(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The env has a camera (``images/top``); the server reads one image it calls
    ``agentview`` (no state) and returns [4, 1] chunks. The camera reaches the server under
    its name, and the chunks run through the agent's Ensembler (a new chunk every 2 ticks,
    the newest's action): the rows equal those of the same chunks from a native model."""
    from cartpole_agents import CHUNK, ENSEMBLE
    from server_proc import controller_server, server_stats

    monkeypatch.setenv("VLA_CAMERA", "1")
    _, want = run(suite, "cartpole_agents:balance_chunked")
    stats = tmp_path / "stats.json"
    serve = ("--camera", "agentview", "--chunk", str(CHUNK), "--stats", str(stats))
    with controller_server(*serve) as (port, proc):
        suite.makeconftest("import cartpole_env  # noqa: F401\n" + CHUNKED.format(port=port))
        result, got = run(suite, "zero")  # the conftest's hud_agent replaces --hud-agent
        seen = server_stats(proc, stats)
    assert len(want) == 4 and outcomes(got) == outcomes(want), result.stdout.str()
    assert {r["success"] for r in got.values()} == {True, False}
    every = ENSEMBLE["query_every"]
    asked = sum(-(-r["steps"] // every) for r in got.values())  # one chunk per 2 ticks
    assert seen["observations"] == asked, (seen, asked)


def test_the_bridge_offloads_an_async_benchmark_and_not_a_step_benchmark() -> None:
    from cartpole_async import AsyncCartPoleBenchmark
    from cartpole_bench import CartPoleBenchmark

    from pytest_hud.interop.vla_eval.bridge import VlaEvalBridge

    assert VlaEvalBridge(AsyncCartPoleBenchmark).offload
    assert not VlaEvalBridge(CartPoleBenchmark).offload


def test_the_bridge_steps_a_step_benchmark_directly_unless_it_overrides_the_async_api() -> None:
    """A StepBenchmark's async methods only wrap step/check_done/make_obs, so the bridge calls
    those; a subclass that overrides apply_action (or is_done, get_observation) is called
    through its own method. The same episode either way."""
    from cartpole_bench import CartPoleBenchmark

    from pytest_hud.interop.vla_eval.bridge import VlaEvalBridge

    class Counted(CartPoleBenchmark):
        applied = 0

        async def apply_action(self, action: dict[str, Any]) -> None:
            type(self).applied += 1
            await super().apply_action(action)

    seen = {}
    for kind in (CartPoleBenchmark, Counted):
        bridge = VlaEvalBridge(kind, params={"goals": (1e9,)}, max_steps=50)
        bridge.reset(task={"name": "goal0", "goal": 1e9, "episode_idx": 7})
        states = []
        for push in (1.0, 0.0, 1.0, 1.0):
            bridge.step(np.array([[push]], np.float32))
            data, done, reward = bridge.get_observation()
            states.append((data["states"][0].copy(), bool(done[0]), float(reward[0])))
        seen[kind.__name__] = states
        bridge.close()
    assert Counted.applied == 4
    for (a, da, ra), (b, db, rb) in zip(seen["CartPoleBenchmark"], seen["Counted"], strict=True):
        np.testing.assert_array_equal(a, b)
        assert (da, ra) == (db, rb)
    assert len({s.tobytes() for s, _, _ in seen["Counted"]}) == 4  # the pole moved each step


@pytest.mark.parametrize("agent", ["native", "vla-eval"])
def test_an_async_benchmark_gives_the_rows_of_its_step_benchmark(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, agent: str
) -> None:
    """vla-eval's async ``Benchmark`` API (every method suspends) served by env.vla_eval on
    a loop of its own in the sim: the same rows as the StepBenchmark, with either agent."""
    from server_proc import controller_server

    _, want = run(suite, "cartpole_agents:balance")
    monkeypatch.setenv("VLA_ASYNC", "1")
    if agent == "native":
        result, got = run(suite, "cartpole_agents:balance")
    else:
        with controller_server() as (port, _):
            result, got = run(suite, f"vla-eval:ws://127.0.0.1:{port}")
    assert len(want) == 4 and outcomes(got) == outcomes(want), result.stdout.str()
