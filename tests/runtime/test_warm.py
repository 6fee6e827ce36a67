"""The warm pool (runtime/warm.py) on the real Docker engine: it boots the planned rows'
containers ahead (never more than its size), hands each to its own row's rollout, and
removes every container it booted (taken or not) when its scope ends; a boot failure is
that row's error, word for word as without the pool; results are the same with the pool
on and off; a SIGINT to a real pytest session with booted-ahead containers leaves none.
Skips only when no engine is reachable (fails instead under PYTEST_HUD_REQUIRE_ALL=1)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import zero_agent
from docker_helpers import HANG_ENV, leftovers, session_containers
from waiting import wait_for

from pytest_hud import DockerRuntime, Task, run
from pytest_hud.plumbing.process import child_env
from pytest_hud.runtime.rollout import rollout
from pytest_hud.runtime.warm import WarmPool

pytestmark = [pytest.mark.docker, pytest.mark.anyio]
# the docker tests' fixtures: the engine, the test image, a per-test label checked clean
ROWS = [Task("cartpole", "balance", {"seed": s}) for s in range(4)]


async def test_pool_boots_ahead_within_its_size_and_removes_every_container(
    client, image, mark
) -> None:
    runtime = DockerRuntime(image, labels=mark)
    async with WarmPool(runtime, size=2) as pool:
        pool.plan(enumerate(ROWS))
        await pool.settled()
        ahead = leftovers(client, mark["pytest-hud.test"])
        assert len(ahead) == 2 and pool.warm == 2  # booted before any rollout, bounded
        first = await rollout(ROWS[0], zero_agent, pool.serving(0))
        assert first.error is None and first.steps
        assert pool.stats["ready"] == 1  # it found its container up
        await pool.settled()  # row 0's taken slot went to row 2
        assert len(leftovers(client, mark["pytest-hud.test"])) == 2  # 1 and 2, 0 removed
        pool.plan([(3, ROWS[3])])  # row 1 and 2 skipped: their containers go
        await pool.settled()
        assert pool.warm == 1 and pool.stats["discarded"] == 2
    # rows 3's container, booted and never taken, is removed with the scope (and `mark`
    # checks that no container of this test remains)
    assert leftovers(client, mark["pytest-hud.test"]) == []


class GatedExit:
    """A real DockerRuntime whose substrates' exit first waits for ``gate`` (the test
    opens it), so the test sees the order of a rollout's end and its container's exit."""

    def __init__(self, runtime: DockerRuntime) -> None:
        self.runtime = runtime
        self.gate = asyncio.Event()

    @contextlib.asynccontextmanager
    async def __call__(self, task: Task) -> AsyncIterator[Any]:
        async with self.runtime(task) as substrate:
            yield substrate
            await self.gate.wait()


async def test_a_finished_rollouts_container_is_exited_behind_it(client, image, mark) -> None:
    gated = GatedExit(DockerRuntime(image, labels=mark))
    async with WarmPool(gated, size=1) as pool:
        pool.plan(enumerate(ROWS[:2]))
        first = await asyncio.wait_for(rollout(ROWS[0], zero_agent, pool.serving(0)), 300)
        # the rollout is over while its container's exit still waits on the gate
        assert first.error is None and first.steps and pool.stats["exited_behind"] == 1
        await asyncio.wait_for(asyncio.shield(pool._entries[1].boot), 300)  # row 1: ahead
        assert len(leftovers(client, mark["pytest-hud.test"])) == 2
        gated.gate.set()
        await pool.settled()  # waits for the exit behind row 0 too
        assert len(leftovers(client, mark["pytest-hud.test"])) == 1  # row 1's, untaken
    assert leftovers(client, mark["pytest-hud.test"]) == []


class FailingExit(GatedExit):
    """Its substrates' exit removes the container, then raises (a teardown that failed)."""

    @contextlib.asynccontextmanager
    async def __call__(self, task: Task) -> AsyncIterator[Any]:
        async with self.runtime(task) as substrate:
            yield substrate
        raise RuntimeError("teardown failed")


async def test_an_exit_behind_that_fails_is_raised_when_the_pool_ends(client, image, mark) -> None:
    failing = FailingExit(DockerRuntime(image, labels=mark))
    with pytest.raises(RuntimeError, match="teardown failed"):
        async with WarmPool(failing, size=1) as pool:
            pool.plan([(0, ROWS[0])])
            result = await asyncio.wait_for(rollout(ROWS[0], zero_agent, pool.serving(0)), 300)
            assert result.error is None and pool.stats["exited_behind"] == 1
            await pool.settled()  # the exit has failed by now: logged, kept for the end
    assert leftovers(client, mark["pytest-hud.test"]) == []


async def test_results_are_the_same_with_the_pool_on_and_off(client, image, mark) -> None:
    runtime = DockerRuntime(image, labels=mark)
    off = await run(ROWS[:3], zero_agent, runtime, max_concurrent=2, warm=0)
    on = await run(ROWS[:3], zero_agent, runtime, max_concurrent=2, warm=2)

    def rows(results):  # type: ignore[no-untyped-def]
        return [(r.task.key, r.steps, r.score, r.success, r.total_reward, r.error) for r in results]

    assert rows(on) == rows(off) and all(r.error is None for r in on)


async def test_a_failed_boot_is_its_rows_error_as_without_the_pool(client, image, mark) -> None:
    runtime = DockerRuntime(image, module="no/such/env.py", labels=mark)
    off = await run(ROWS[:2], zero_agent, runtime, max_concurrent=1, warm=0)
    on = await run(ROWS[:2], zero_agent, runtime, max_concurrent=1, warm=1)  # row 1: ahead

    def first_lines(results):  # type: ignore[no-untyped-def]
        return [
            (r.phase, r.error_type, re.sub(r"container [0-9a-f]{10,}", "container ID", line))
            for r in results
            for line in [str(r.error).splitlines()[0]]
        ]

    assert first_lines(on) == first_lines(off)
    assert all("exited with code 1 before its env server answered" in r.error for r in on)
    # the log tail travels too (the same lines as without the pool)
    assert all("env module /app/no/such/env.py does not exist" in r.error for r in on)


async def test_rollout_timeout_while_its_warm_boot_runs_removes_it(client, image, mark) -> None:
    hang = ["python3", "-c", "import time; time.sleep(600)"]
    runtime = DockerRuntime(image, command=hang, boot_timeout=300.0, labels=mark)
    results = await run(ROWS[:2], zero_agent, runtime, max_concurrent=1, rollout_timeout=3.0)
    assert [(r.error_type, r.phase) for r in results] == [("TimeoutError", "place")] * 2
    assert leftovers(client, mark["pytest-hud.test"]) == []


def test_sigint_with_containers_booted_ahead_leaves_none(tmp_path: Path, hang_image) -> None:
    """A real pytest session (no xdist, --hud-concurrency=2, the pool on by default):
    two rollouts hang, two more containers are booted ahead; SIGINT ends it cleanly."""
    (tmp_path / "hang_env.py").write_text(HANG_ENV.read_text())
    (tmp_path / "conftest.py").write_text("import hang_env  # noqa: F401\n")
    rows = "".join(f'{{"env": "hang", "id": "wait", "args": {{"n": {n}}}}}\n' for n in range(6))
    (tmp_path / "rows.jsonl").write_text(rows)
    token = uuid.uuid4().hex
    env = {**child_env(), "PYTEST_HUD_SESSION": token}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "pytest", "rows.jsonl", "-p", "no:cacheprovider"]
    argv += ["-p", "no:xdist", "--hud-agent=zero", f"--hud-runtime=docker:{hang_image}"]
    argv += ["--hud-concurrency=2", "--hud-timeout=900"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        # 2 running + 2 booted ahead, and never more than that
        assert wait_for(lambda: len(session_containers(token)) >= 4, 240), "no warm containers"
        assert len(session_containers(token)) == 4
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the session did not end within 120 s of SIGINT")
        assert "KeyboardInterrupt" in out.decode(errors="replace")
        assert session_containers(token) == [], "SIGINT left containers behind"
    finally:
        from pytest_hud.runtime.docker.engine import _client

        for cid in session_containers(token):
            _client().containers.get(cid).remove(force=True)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_which_providers_warm_by_default_and_the_opt_out() -> None:
    from pytest_hud import LocalRuntime, Shared, SubprocessRuntime
    from pytest_hud.runtime.placement import provider_for
    from pytest_hud.runtime.warm import pool_size

    cheap = Path(__file__).resolve().parents[2] / "bench" / "envs" / "cheap.py"
    assert pool_size(DockerRuntime("img"), None, 4) == 4  # auto: --hud-concurrency
    assert pool_size(SubprocessRuntime(cheap), None, 2) == 2
    assert pool_size(provider_for("subprocess"), None, 3) == 3
    assert pool_size(provider_for("docker"), None, 1) == 1
    assert pool_size(LocalRuntime(cheap), None, 4) == 0  # boots on the episodes' loop
    assert pool_size(provider_for("local"), None, 4) == 0
    assert pool_size(provider_for("tcp://127.0.0.1:1"), None, 4) == 0  # borrowed
    assert pool_size(DockerRuntime("img"), 0, 4) == 0  # --hud-warm=off
    assert pool_size(LocalRuntime(cheap), 2, 1) == 2  # --hud-warm=N: any runtime
    assert pool_size(Shared(DockerRuntime("img"), width=2), 3, 4) == 0  # shared, not fresh
