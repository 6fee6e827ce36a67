"""Evaluator: runs the items' rollouts on the plugin's loop, starting the next ``concurrency - 1``
cases ahead (only those with the same provider and agent fixtures). Items report in order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.cases import HudCase
from pytest_hud._plugin.loop import LoopThread
from pytest_hud._plugin.options import HudOptions
from pytest_hud.runtime.control_pool import ControlPool, use_pool
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task
from pytest_hud.runtime.warm import WarmPool, pool_size

if TYPE_CHECKING:
    from pytest_hud.robot.contract import Spaces
    from pytest_hud.robot.episode import EpisodeRun

__all__ = ["Evaluator"]

log = logging.getLogger(__name__)

#: Seconds between looks for items handed to this worker while its rollouts run, when it
#: holds fewer than the concurrency (see :meth:`Evaluator.result`).
AHEAD_POLL_S = 0.05


class Evaluator:
    """Owns the rollout loop, the provider's scope and every case's rollout future."""

    def __init__(self, options: HudOptions, artifacts: Path, config: pytest.Config) -> None:
        self.options = options
        #: substrates boot in this process (a feature running whole rollouts elsewhere,
        #: --hud-delegate, turns it off: no warm pool, no early boots)
        self.boots_here = True
        self.config = config
        self.hook = config.hook
        self.artifacts = artifacts
        self.cases: dict[str, HudCase] = {}
        #: Items with equal keys resolve hud_provider and hud_agent to the same objects.
        self.keys: dict[str, Hashable] = {}
        self.futures: dict[str, concurrent.futures.Future[RolloutResult]] = {}
        self.results: list[RolloutResult] = []
        self.schedule: Callable[[str], list[str]] = lambda nodeid: [nodeid]
        self._loop: LoopThread | None = None
        self._stack = contextlib.AsyncExitStack()  # Shared scopes, left at close()
        self._sem = asyncio.Semaphore(options.concurrency)  # binds to the loop on first use
        self._providers: dict[int, Provider] = {}  # by id, entered once each
        #: (agent given, agent as rollouts call it) by the id of the agent given.
        self._agents: dict[int, tuple[Agent, Agent]] = {}
        self.steps: dict[int, int] = {}  # live step counts by the task sent
        self._pool = ControlPool()  # control connections kept between rollouts
        self._primes: list[concurrent.futures.Future[None]] = []  # boots started by prime()

    # -- setup -------------------------------------------------------------------------
    def register(self, nodeid: str, case: HudCase, key: Hashable = None) -> None:
        """Add an item; ``key`` groups items whose fixtures give the same provider and agent
        (only those may start each other's rollouts ahead of time)."""
        self.cases[nodeid] = case
        self.keys[nodeid] = key

    @property
    def loop(self) -> LoopThread:
        if self._loop is None:
            self._loop = LoopThread()
        return self._loop

    def _binding(self, provider: Provider, agent: Agent) -> tuple[Provider, Agent]:
        """The provider (its Shared scope entered on first use) and the agent as rollouts
        use it (batched for --hud-concurrency, with the plugin's observers), once each."""
        if id(agent) not in self._agents:  # the agent is kept too, so its id stays unique
            self._agents[id(agent)] = (agent, self._prepare(agent))
        return self.entered(provider), self._agents[id(agent)][1]

    def entered(self, provider: Provider) -> Provider:
        """The provider as rollouts use it: its Shared scope entered, in a warm pool where
        booting ahead pays; once per provider object."""
        if id(provider) not in self._providers:
            if isinstance(provider, Shared):
                self.loop.run(self._stack.enter_async_context(provider), timeout=60)
            self._providers[id(provider)] = self._warm(provider)  # holds it: its id stays unique
        return self._providers[id(provider)]

    def prime(self, provider: Provider, nodeids: list[str]) -> None:
        """Start booting the substrates of these items (the first to run) now, in the
        background: the session calls this before it loads the agent, so the boots run
        while torch and the policy load instead of after. A warm pool gets them as its
        plan; a Shared provider boots the first row's substrate. A failed boot here is not
        an error: the rollout boots again."""
        rows = [(n, self.cases[n].task) for n in nodeids if n in self.cases]
        if not rows or not self.boots_here:
            return
        bound = self.entered(provider)
        if isinstance(bound, WarmPool):
            ahead = rows[: max(self.options.concurrency, 1) + bound.size]
            self.loop.loop.call_soon_threadsafe(bound.plan, ahead)
        elif isinstance(provider, Shared):
            self._primes.append(self.loop.submit(_boot(provider, rows[0][1])))

    def _warm(self, provider: Provider) -> Provider:
        """The provider, in a warm pool (its scope entered) when booting ahead pays
        (runtime/warm.py); the fixture's value stays as the user made it."""
        size = pool_size(provider, self.options.warm, self.options.concurrency)
        if not size or not self.boots_here:  # a delegated rollout boots afar
            return provider
        pool = WarmPool(provider, size)
        self.loop.run(self._stack.enter_async_context(pool), timeout=60)
        return pool

    def _prepare(self, agent: Agent) -> Agent:
        """The agent as rollouts call it: the session's settings (max steps, video,
        progress, recording) travel with each call; the agent given is never changed."""
        from pytest_hud._plugin.video import video_factory
        from pytest_hud.robot.agent.agent import ConfiguredAgent, RobotAgent, RunSettings
        from pytest_hud.robot.agent.batching import BatchedAgent

        if not isinstance(agent, RobotAgent):
            return agent
        extra = [
            o for found in self.hook.pytest_hud_episode_observers(config=self.config) for o in found
        ]
        settings = RunSettings(
            max_steps=self.options.max_steps,
            timing=self.hook.pytest_hud_timing(config=self.config),
            observers=(
                video_factory(self.artifacts / "videos"),
                self._progress_observer,
                *extra,
            ),
        )
        batchable = getattr(agent.model, "batchable", True)  # RemoteModel is per-row
        if self.options.concurrency > 1 and batchable and not isinstance(agent, BatchedAgent):
            agent = BatchedAgent(agent, split=self.options.split)
        return ConfiguredAgent(agent, settings)

    # -- running -----------------------------------------------------------------------
    def _progress_observer(self, run: EpisodeRun | None, spaces: Spaces) -> _StepCounter:
        return _StepCounter(self.steps, id(run.task) if run is not None else 0)

    def result(
        self,
        nodeid: str,
        provider: Provider,
        agent: Agent,
        progress: Callable[[int, float], None] | None = None,
    ) -> RolloutResult:
        """This item's rollout result with this item's provider and agent, starting the
        lookahead (later items of the same key) first; bounded wait.

        ``progress(steps, seconds)`` is called from this (the test's) thread about once a
        second while the episode runs, so a live line never interleaves with pytest's output.
        """
        binding = self._binding(provider, agent)
        pool = binding[0] if isinstance(binding[0], WarmPool) else None
        width = max(self.options.concurrency, 1)

        def look_ahead(known: int = 0) -> int:
            """Start this item's and the next items' rollouts (up to the concurrency); how
            many items it found (nothing done when no more than ``known``)."""
            extra = pool.size if pool is not None else 0
            ahead = self._upcoming(nodeid, self.options.concurrency - 1 + extra)
            if 1 + len(ahead) <= known:
                return known
            if pool is not None:  # its next rows boot while these run
                rows = [(n, self.cases[n].task) for n in [nodeid, *ahead]]
                self.loop.loop.call_soon_threadsafe(pool.plan, rows)
            # this item's own rollout once only: its future leaves the table as it is taken
            for nid in ahead[: width - 1] if known else [nodeid, *ahead][:width]:
                self._start(nid, self._binding(provider, self._agent_of(nid, agent)))
            return 1 + len(ahead)

        found = look_ahead()
        fut = self.futures.pop(nodeid)
        task_key = id(self.cases[nodeid].task)
        deadline = time.monotonic() + self.options.timeout + 120
        start = shown = time.monotonic()
        try:
            while True:
                # an item handed to this worker while its rollouts run starts at once, not
                # when this one ends: the hand-out races the start of this item (the
                # rollouts it holds up would run a whole episode late, alone)
                tick = AHEAD_POLL_S if found < width else 1.0
                try:
                    result = fut.result(timeout=min(tick, max(deadline - time.monotonic(), 0)))
                    break
                except concurrent.futures.TimeoutError:
                    if time.monotonic() >= deadline:
                        raise
                    if found < width:
                        found = look_ahead(found)
                    if progress is not None and time.monotonic() - shown >= 0.9:  # once a second
                        shown = time.monotonic()
                        progress(self.steps.get(task_key, 0), shown - start)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            error = f"no result within {self.options.timeout + 120} s"
            result = self._wait_error(nodeid, error, "TimeoutError")
        except BaseException as exc:
            # the item gave up waiting (pytest-timeout failed it, Ctrl-C): a rollout left
            # running keeps the rollout slot, its substrate's seat and the robot, and every
            # later item would wait for them in turn
            fut.cancel()
            if not isinstance(exc, pytest.fail.Exception):
                raise
            # pytest-timeout's alarm: the row is an error the results and ledger keep
            error = (
                f"pytest-timeout ended the wait ({exc}); the rollout was cancelled: set "
                f"--timeout above --hud-timeout ({self.options.timeout:g} s) to let it end"
            )
            result = self._wait_error(nodeid, error, "Timeout")
        self.steps.pop(task_key, None)
        self.results.append(result)
        return result

    def _wait_error(self, nodeid: str, error: str, error_type: str) -> RolloutResult:
        """The row of an item whose wait for its rollout ended without a result."""
        result = RolloutResult(self.cases[nodeid].task, self.cases[nodeid].rep)
        result.error, result.error_type, result.phase = error, error_type, "wait"
        return result

    def _agent_of(self, nodeid: str, agent: Agent) -> Agent:
        """The agent this case runs with: its arm's when several are given, else ``agent``."""
        case = self.cases.get(nodeid)
        if case is None or case.arm is None:
            return agent
        other = self.hook.pytest_hud_case_agent(config=self.config, nodeid=nodeid, case=case)
        return agent if other is None else other

    def _upcoming(self, nodeid: str, want: int) -> list[str]:
        """The next ``want`` items of the same key in the schedule, not skipped. Only as far
        into the schedule as needed: scanning all of it per item is quadratic in the
        items, and none of it is needed at concurrency 1 without a warm pool."""
        found: list[str] = []
        if want < 1:
            return found
        key = self.keys.get(nodeid)
        for n in self.schedule(nodeid):
            if len(found) >= want:
                break
            if n in self.cases and self.keys[n] == key and not self._skipped(n):
                found.append(n)
        return found

    def _skipped(self, nodeid: str) -> bool:
        """A feature decided this case is not run (a decided sequential task)."""
        reason = self.hook.pytest_hud_skip_case(
            config=self.config, nodeid=nodeid, case=self.cases[nodeid]
        )
        return reason is not None

    def _start(self, nodeid: str, binding: tuple[Provider, Agent]) -> None:
        if nodeid in self.futures or nodeid not in self.cases:
            return
        provider, agent = binding
        if isinstance(provider, WarmPool):
            provider = provider.serving(nodeid)
        self.futures[nodeid] = self.loop.submit(self._rollout(self.cases[nodeid], provider, agent))

    async def _rollout(self, case: HudCase, provider: Provider, agent: Agent) -> RolloutResult:
        async with self._sem:
            with use_pool(self._pool):  # Shared substrates keep their control connections
                timeout = self.options.timeout
                elsewhere = self.hook.pytest_hud_run_rollout(
                    config=self.config,
                    task=case.task,
                    agent=agent,
                    provider=provider,
                    index=case.rep,
                    timeout=timeout,
                )
                if elsewhere is not None:
                    result: RolloutResult = await elsewhere
                else:
                    result = await rollout(
                        case.task, agent, provider, index=case.rep, timeout=timeout
                    )
        self.hook.pytest_hud_episode_result(config=self.config, result=result)
        return result

    async def _close_agents(self) -> None:
        """Let each agent release what it kept between rollouts (a model server's
        connections), on the loop they were opened on."""
        closers = [getattr(given, "aclose", None) for given, _ in self._agents.values()]
        await asyncio.gather(*(c() for c in closers if callable(c)), return_exceptions=True)

    def close(self) -> None:
        """Cancel rollouts nobody asked for, release what agents keep, leave Shared scopes,
        stop the loop."""
        for fut in self.futures.values():
            fut.cancel()
        for prime in self._primes:
            prime.cancel()
        self.futures.clear()
        if self._loop is None:
            return
        with contextlib.suppress(Exception):
            self._loop.run(self._pool.drain(), timeout=30)  # before the servers stop
        with contextlib.suppress(Exception):
            self._loop.run(self._close_agents(), timeout=30)
        with contextlib.suppress(Exception):
            self._loop.run(self._stack.aclose(), timeout=120)
        self._loop.close()
        self._loop = None


async def _boot(shared: Shared, task: Task) -> None:
    """Boot ``task``'s substrate in ``shared`` by leasing it once (it stays up for the
    rollouts' leases)."""
    try:
        async with shared(task):
            pass
    except Exception as exc:  # the first rollout's own lease boots again and reports it
        log.debug("booting ahead for %s failed: %s", task, exc)


class _StepCounter:
    """Counts an episode's executed ticks for the live progress line."""

    def __init__(self, counts: dict[int, int], key: int) -> None:
        self.counts = counts
        self.key = key
        counts[key] = 0

    def step(self, data: object, action: object) -> None:
        self.counts[self.key] = self.counts.get(self.key, 0) + 1

    def end(self, ok: bool) -> dict[str, object]:
        return {}
