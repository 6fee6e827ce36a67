"""Placement end to end: the env server and its sessions, Runtime, Shared, Local and
Subprocess runtimes, resolution, and the routing patterns of examples/routing.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agents import walk_away_agent, zero_agent
from procs import live_children_of

from pytest_hud import LocalRuntime, Runtime, Shared, SubprocessRuntime, Task, Taskset, run
from pytest_hud.forkserver import client as forkserver
from pytest_hud.plumbing.loader import load_module
from pytest_hud.robot import RobotClient
from pytest_hud.runtime import (
    ControlClient,
    ControlError,
    EnvServer,
    PlacementError,
    SharedScopeError,
    rollout,
)
from pytest_hud.runtime.backends import parse
from pytest_hud.runtime.modules import module_environments

HERE = Path(__file__).resolve().parents[1] / "helpers"
ROOT = HERE.parents[1]
COUNTER = HERE / "envs" / "counter_env.py"
PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"
sys.path.insert(0, str(ROOT / "examples"))
import routing  # noqa: E402

pytestmark = pytest.mark.anyio


def children() -> set[int]:
    """Live (non-zombie) processes this process started: its children, and the children
    of the zygotes it owns (which fork its sims and env servers); not the zygotes, which
    live as long as the session does."""
    zygotes = {z.pid for z in forkserver.zygotes() if z.pid is not None}
    return set().union(*(live_children_of(p) for p in {os.getpid(), *zygotes})) - zygotes


def is_env_server(pid: int) -> bool:
    """A plain env server runs ``-m pytest_hud.serve``; a forked one is named ``hud serve``."""
    with contextlib.suppress(OSError):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        return b"pytest_hud.serve" in cmdline or comm == "hud serve"
    return False


@pytest.fixture
async def counter_server():
    module = load_module(COUNTER, fresh=True)
    server = EnvServer(module_environments(module))
    await server.start()
    try:
        yield server, module
    finally:
        await server.stop()


def task(template: str, **args) -> Task:
    return Task("counter", template, args)


async def test_concurrent_sessions_on_one_server(counter_server) -> None:
    server, _ = counter_server
    results = await run([task("count", seed=s) for s in range(4)], zero_agent, Runtime(server.url))
    assert [r.error for r in results] == [None] * 4
    assert [r.grade["seed"] for r in results] == [0, 1, 2, 3]
    # zeros never reach the counter's target: graded failures (not errors), 3 steps each
    assert all(r.success is False and r.steps == 3 for r in results)


async def test_borrowed_runtime_provisions_nothing() -> None:
    rt = Runtime("tcp://127.0.0.1:1")
    async with rt(task("count")) as got:
        assert got is rt


async def test_dropped_session_runs_cleanup_and_frees_its_slot(counter_server) -> None:
    server, module = counter_server
    control = await ControlClient.connect(server.url)
    await control.start(task("cleanup_probe", tag="drop"))
    for _ in range(4):  # claim all 4 robot slots, then drop the connection
        await control.start(task("count"))
    await control.close()
    for _ in range(100):
        if "cleanup drop" in module.EVENTS:
            break
        await asyncio.sleep(0.02)
    assert "cleanup drop" in module.EVENTS
    results = await run([task("count", seed=s) for s in range(4)], zero_agent, Runtime(server.url))
    assert [r.error for r in results] == [None] * 4  # the dropped session's slots came back


async def test_unknown_env_template_and_broken_templates(counter_server) -> None:
    server, _ = counter_server
    async with await ControlClient.connect(server.url) as control:
        with pytest.raises(ControlError, match="no env 'nope'; it serves: counter"):
            await control.start(Task("nope", "count"))
        with pytest.raises(ControlError, match="no template 'nah'; known templates: .*count"):
            await control.start(task("nah"))
        with pytest.raises(ControlError, match="first yield must be a dict with a 'prompt'"):
            await control.start(task("bad_prompt"))
        with pytest.raises(ControlError, match="unexpected keyword argument 'colour'"):
            await control.start(task("count", colour=1))
        run_ = await control.start(task("no_grade"))
        with pytest.raises(ControlError, match="ended after one yield"):
            await control.result(run_)
        assert (await control.ping())["envs"] == ["counter"]


async def test_agent_that_walks_away_mid_episode_errors_and_frees_the_slot(counter_server) -> None:
    server, _ = counter_server
    res = await rollout(task("count", seed=1), walk_away_agent, Runtime(server.url))
    assert res.error is not None and res.phase == "agent" and "the agent gave up" in res.error
    assert res.success is None  # an error is never a failed episode
    results = await run([task("count", seed=s) for s in range(4)], zero_agent, Runtime(server.url))
    assert [r.error for r in results] == [None] * 4


async def test_local_runtime_serves_a_fresh_module_per_acquisition() -> None:
    provider = LocalRuntime(COUNTER)
    async with provider(task("pid")) as a, provider(task("pid")) as b:
        assert a.url != b.url
    res = await rollout(task("pid"), lambda run: asyncio.sleep(0), provider)
    assert res.grade["pid"] == os.getpid()  # in this process


async def test_local_runtime_build_from_the_row() -> None:
    rows = [
        Task("scene", "ep", {"seed": 1, "gym_id": "Pendulum-v1"}),
        Task("scene", "ep", {"seed": 2, "gym_id": "CartPole-v1"}),
    ]
    results = await run(rows, zero_agent, routing.build_from_row())
    assert [r.error for r in results] == [None, None]
    assert results[0].prompt == "Pendulum-v1 seed 1" and results[0].steps == 200
    assert results[1].prompt == "CartPole-v1 seed 2" and results[1].steps < 200


async def test_subprocess_runtime_runs_in_a_child_and_reaps_it() -> None:
    before = children()
    res = await rollout(task("pid"), lambda run: asyncio.sleep(0), SubprocessRuntime(COUNTER))
    assert res.error is None and res.grade["pid"] != os.getpid()
    assert children() == before


async def test_subprocess_that_exits_at_boot_errors_with_its_output(tmp_path: Path) -> None:
    bad = tmp_path / "broken_env.py"
    bad.write_text("raise ImportError('no module named isaacsim')\n")
    before = children()
    res = await rollout(task("count"), zero_agent, SubprocessRuntime(bad))
    assert res.phase == "place" and res.error_type == "SubstrateError"
    assert "exited with code" in res.error and "no module named isaacsim" in res.error
    assert children() == before


async def test_subprocess_never_ready_is_a_bounded_wait(tmp_path: Path) -> None:
    hang = tmp_path / "hang_env.py"
    hang.write_text("import time\ntime.sleep(120)\n")
    before = children()  # another test's children on this worker are not this one's
    res = await rollout(task("count"), zero_agent, SubprocessRuntime(hang, boot_timeout=1.0))
    assert res.phase == "place" and "did not announce itself within 1.0 s" in res.error
    assert children() <= before


async def test_rollout_timeout_is_an_error_not_a_failure(counter_server) -> None:
    server, _ = counter_server
    res = await rollout(
        task("slow"), lambda run: asyncio.sleep(0), Runtime(server.url), timeout=0.5
    )
    assert res.error_type == "TimeoutError" and "timed out after 0.5 s" in res.error
    assert res.success is None


# -- Shared -----------------------------------------------------------------------------
class CountingProvider:
    """A provider that counts boots and concurrent leases; boot fails on request."""

    def __init__(self, runtime_url: str, fail_first: int = 0) -> None:
        self.url = runtime_url
        self.boots = 0
        self.live = 0
        self.fail_first = fail_first
        self.torn_down = 0

    @contextlib.asynccontextmanager
    async def __call__(self, task: Task):
        self.boots += 1
        if self.boots <= self.fail_first:
            raise RuntimeError(f"boot {self.boots} failed")
        await asyncio.sleep(0.01)
        try:
            yield Runtime(self.url)
        finally:
            self.torn_down += 1


async def test_shared_boots_lazily_once_per_key_and_caps_width() -> None:
    inner = CountingProvider("tcp://127.0.0.1:1")
    shared = Shared(inner, width=3)
    live = peak = 0

    async def lease(t: Task) -> None:
        nonlocal live, peak
        async with shared(t):
            live += 1
            peak = max(peak, live)
            await asyncio.sleep(0.02)
            live -= 1

    async with shared:
        assert inner.boots == 0  # lazy
        await asyncio.gather(*(lease(task("count", seed=i)) for i in range(9)))
        assert inner.boots == 1 and peak == 3 and shared.substrates == 1
        await asyncio.gather(lease(Task("other", "x")), lease(task("count")))
        assert inner.boots == 2  # one substrate per env
    assert inner.torn_down == 2 and shared.substrates == 0


async def test_shared_failed_boot_fails_only_its_lease() -> None:
    inner = CountingProvider("tcp://127.0.0.1:1", fail_first=1)
    async with Shared(inner, width=2) as shared:
        with pytest.raises(RuntimeError, match="boot 1 failed"):
            async with shared(task("count")):
                pass
        async with shared(task("count")) as rt:  # the next lease boots again
            assert rt.url == "tcp://127.0.0.1:1"
    assert inner.boots == 2


async def test_shared_outside_its_scope_is_a_clear_error() -> None:
    shared = Shared(CountingProvider("tcp://127.0.0.1:1"))
    with pytest.raises(SharedScopeError, match="outside its scope.*async with shared"):
        async with shared(task("count")):
            pass


async def test_shared_recycles_a_substrate_after_a_timed_out_rollout() -> None:
    inner = CountingProvider("tcp://127.0.0.1:1")
    async with Shared(inner, width=2) as shared:
        with pytest.raises(TimeoutError):
            async with shared(task("count")):
                raise TimeoutError
        assert inner.torn_down == 1
        async with shared(task("count")):
            pass
        assert inner.boots == 2


async def test_shared_real_substrate_serves_a_vectorized_sim() -> None:
    before = children()  # an earlier test's session-long ones (a Ray cluster's watchdog)
    inner = SubprocessRuntime(COUNTER)
    shared = Shared(inner, width=4)
    results = await run(
        [task("count", seed=s) for s in range(8)], zero_agent, shared, max_concurrent=8
    )
    assert [r.error for r in results] == [None] * 8
    assert sorted(r.grade["seed"] for r in results) == list(range(8))
    assert shared.boots == 1  # 8 rollouts, 4 at a time, one substrate
    assert children() <= before


async def test_shared_boots_a_sibling_when_one_substrate_seats_fewer_than_the_width() -> None:
    """width 8 over a 4-slot sim: 8 rollouts at once on 2 substrates, each reused, where
    one substrate alone made the other 4 wait (the sims then step on separate cores)."""
    before = children()  # an earlier test's session-long ones (a Ray cluster's watchdog)
    inner = SubprocessRuntime(COUNTER)
    shared = Shared(inner, width=8)
    live = peak = 0
    eight = asyncio.Event()

    async def counted(run: Any) -> Any:
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        if peak == 8:
            eight.set()
        try:
            # the first wave holds its seats until all 8 are in their episodes (the sibling's
            # boot can take seconds under load); bounded, so a placement seating only 4 fails
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(eight.wait(), 30)
            return await zero_agent(run)
        finally:
            live -= 1

    rows = [task("count", seed=s) for s in range(16)]
    results = await run(rows, counted, shared, max_concurrent=8)
    assert [r.error for r in results] == [None] * 16
    assert sorted(r.grade["seed"] for r in results) == list(range(16))
    assert shared.boots == 2 and peak == 8
    assert children() <= before


async def test_shared_boots_no_sibling_before_the_first_substrate_reports_its_capacity() -> None:
    """The first boot could still seat everyone: leases wait for its capacity instead of
    each booting a substrate of its own."""
    from pytest_hud.runtime.capacity import Seats

    seats = Seats(width=8)
    order: list[str] = []

    async def lease(name: str, hold: asyncio.Event) -> None:
        async with seats.seat() as sub:
            order.append(f"{name} on {seats.subs.index(sub)}")
            if not sub.sized:
                await seats.resize(sub, 3)  # the boot learns: 3 slots
            await hold.wait()

    hold = asyncio.Event()
    tasks = [asyncio.ensure_future(lease(str(i), hold)) for i in range(8)]
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(seats.subs) == 3  # 3 + 3 + 2 seats for 8 leases
    assert [o.split(" on ")[1] for o in order] == ["0", "0", "0", "1", "1", "1", "2", "2"]
    hold.set()
    await asyncio.gather(*tasks)


# -- resolution and routing ------------------------------------------------------------
async def test_resolution_serves_a_python_taskset_from_its_file() -> None:
    ts = Taskset.load(PENDULUM)
    results = await run([t for t in ts if t.env == "pendulum"][:1], zero_agent)  # envs imported
    assert results[0].error is None and results[0].steps == 200
    results = await run(ts, zero_agent, max_concurrent=3)  # taskset source: served from file
    assert [r.error for r in results] == [None] * len(ts)


async def test_resolution_without_any_declaration_names_the_forms() -> None:
    with pytest.raises(PlacementError, match=r"(?s)'ghost'.*LocalRuntime.*DockerRuntime.*Shared"):
        await run([Task("ghost", "t")], zero_agent)


async def test_route_rows_across_providers_and_borrow_warm_servers(counter_server) -> None:
    server, _ = counter_server
    provider = routing.route_by_env(
        {"counter": Runtime(server.url), "pendulum": LocalRuntime(PENDULUM)}
    )
    rows = [task("count", seed=5), Task("pendulum", "swing_up", {"seed": 0})]
    results = await run(rows, zero_agent, provider)
    assert [r.error for r in results] == [None, None]
    assert [r.steps for r in results] == [3, 200]
    missing = await rollout(Task("cartpole", "balance"), zero_agent, provider)
    assert "no provider for env 'cartpole'" in missing.error

    warm = routing.borrow_warm({"a": server.url})
    rows = [Task("counter", "count", {"seed": s}, metadata={"server": "a"}) for s in range(3)]
    async with warm(rows[0]) as rt:
        assert rt.url == server.url  # entering a borrowed runtime provisions nothing
    results = await run(rows, zero_agent, warm)
    assert [r.grade["seed"] for r in results] == [0, 1, 2]


async def test_fresh_substrate_per_rollout_example() -> None:
    before = children()  # an earlier test's session-long ones (a Ray cluster's watchdog)
    results = await run(
        [Task("pendulum", "swing_up", {"seed": 3})], zero_agent, routing.fresh_per_rollout()
    )
    assert results[0].error is None and results[0].steps == 200
    assert children() <= before


def killing_agent(victims: set[int], sims: set[int]) -> Any:
    """An agent that kills the env server (SIGKILL) after its first step, waits for its
    sim to follow (the sim's lifeline), then acts again."""

    async def agent(run: Any) -> dict[str, Any]:
        async with await RobotClient.connect(run.robot, token=run.robot_token) as client:
            await client.get_observation()
            await client.step(np.zeros(2, np.float32))
            assert sims, "the env server has no sim process"
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            async with asyncio.timeout(60):
                while any(Path(f"/proc/{s}").exists() for s in sims):
                    await asyncio.sleep(0.05)
            await client.step(np.zeros(2, np.float32))  # the wire is gone: this raises
        return {}

    return agent


@pytest.mark.parametrize("shared", [False, True], ids=["subprocess", "shared"])
async def test_env_server_dying_mid_episode_says_which_process_and_how(shared: bool) -> None:
    """Issue 12 #14: the rollout said only ``bridge closed the connection: code 1001``.

    Now it names the env server, its pid and the signal that killed it, with its last
    output, as a boot failure already did.
    """
    before = children()
    inner = SubprocessRuntime(COUNTER)
    victims: set[int] = set()

    async def place(provider: Any) -> Any:
        async def agent(run: Any) -> dict[str, Any]:
            new = children() - before  # the env server, and its sim when a zygote forked it
            victims.update(p for p in new if is_env_server(p))
            sims = set().union(*(live_children_of(p) for p in victims)) | (new - victims)
            return await killing_agent(victims, sims)(run)

        return await rollout(task("count"), agent, provider)

    if shared:
        async with Shared(inner, width=2) as provider:
            res = await place(provider)
    else:
        res = await place(inner)
    assert len(victims) == 1
    assert res.error_type == "SubstrateError" and res.phase == "agent", res.error
    (pid,) = victims
    assert f"env server (pid {pid}) was killed by signal SIGKILL (9)" in res.error, res.error
    assert "its last output:" in res.error and "the rollout saw: RobotError" in res.error
    assert children() == before


TWIN = """
from pytest_hud import Environment

env = Environment("twin")


@env.template()
async def {name}(seed: int = 0):
    yield {{"prompt": "{name}"}}
    yield {{"score": 1.0, "success": True, "which": "{name}"}}
"""


async def test_a_row_goes_to_the_module_whose_template_made_it(tmp_path: Path) -> None:
    """Two imported modules declare an env of one name: a row made by one's template is
    checked against and served by that module, whichever was imported last."""
    from pytest_hud._plugin.row_check import check_rows
    from pytest_hud.runtime.placement import declaring_file

    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text(TWIN.format(name="alpha"))
    second.write_text(TWIN.format(name="beta"))
    alpha = load_module(first, fresh=True).alpha
    load_module(second, fresh=True)  # declared later: a lookup by name finds this one
    row = alpha.task(seed=1)
    assert declaring_file(row) == str(first)
    assert declaring_file(Task("twin", "beta")) == str(second)  # a bare row: by name
    check_rows([row], parse("local"))  # the later "twin" has no template alpha: no TaskError

    async def no_robot(run: Any) -> dict[str, Any]:  # the template needs no agent
        return {}

    (result,) = await run([row], no_robot)
    assert result.error is None and result.grade["which"] == "alpha"
