"""The pytest-hud session, one per process: a plain object holding options, evaluator and rows,
composing collection and reporting; features reach it through hooks.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin import heap
from pytest_hud._plugin.arms import Arm, agent_given, arms_of
from pytest_hud._plugin.evaluator import Evaluator
from pytest_hud._plugin.expect import Expectations
from pytest_hud._plugin.identity import RunIdentity
from pytest_hud._plugin.internals import (
    HudBlockScheduling,
    HudDroppingScheduling,
    HudLoadScheduling,
    conftest_agent,
    dropping_scheduler,
    is_worker,
    terminal_writer,
)
from pytest_hud._plugin.interrupts import SignalHandler
from pytest_hud._plugin.options import HudOptions
from pytest_hud._plugin.state import RESULT
from pytest_hud.errors import ExpectError
from pytest_hud.evaluation import results as rep
from pytest_hud.evaluation.verdict import Verdict
from pytest_hud.robot.agent.registry import AgentSpec
from pytest_hud.runtime.backends import RuntimeSpec
from pytest_hud.runtime.placement import provider_for
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import Agent, RolloutResult
from pytest_hud.runtime.warm import spec_pool_size

if TYPE_CHECKING:
    from _pytest._io import TerminalWriter

__all__ = ["PLUGIN", "HudSession", "session_of"]

#: The session on the pytest config's stash.
PLUGIN = pytest.StashKey["HudSession"]()


def session_of(config: pytest.Config) -> HudSession:
    """The pytest-hud session of this pytest run."""
    return config.stash[PLUGIN]


class ProgressLine:
    """``line(steps, seconds)`` shows ``[123 steps, 4.2s]`` after the test id (rewriting the
    last one); ``erase()`` wipes it before pytest writes the outcome."""

    def __init__(self, tw: TerminalWriter) -> None:
        self.tw = tw
        self.shown = 0

    def __call__(self, steps: int, seconds: float) -> None:
        text = f" [{steps} steps, {seconds:.0f}s]"
        self.tw.write("\b" * self.shown + text + " " * max(0, self.shown - len(text)))
        pad = max(0, self.shown - len(text))
        self.tw.write("\b" * pad)
        self.shown = len(text)
        self.tw.flush()

    def erase(self) -> None:
        if self.shown:
            self.tw.write("\b" * self.shown + " " * self.shown + "\b" * self.shown)
            self.shown = 0


class HudSession:
    """Per-session state and the work behind the hooks."""

    def __init__(self, config: pytest.Config, options: HudOptions) -> None:
        self.config = config
        self.options = options
        self.is_worker = is_worker(config)
        #: what --hud-no-auth replaced, put back at unconfigure (pytester runs sessions in-process)
        self.no_auth_before = os.environ.get("PYTEST_HUD_NO_AUTH")
        _session_auth(options.no_auth, self.is_worker)  # before xdist starts its workers
        #: Not run inside another pytest session of this process (pytester's in-process).
        self.outermost = heap.opened()
        root = Path(str(config.rootpath))
        self.artifacts = root / ".hud"
        self.evaluator = Evaluator(options, self.artifacts, config)
        self._agents: dict[AgentSpec, Agent] = {}  # each agent loaded once per process
        self._provider: Provider | None = None
        self._agent_errors: dict[AgentSpec, str] = {}
        #: several --hud-agent: one arm each (empty for one agent)
        self.arms: list[Arm] = arms_of(options.agents)
        self.agent_name = options.agent.text  # read and checked once: _plugin/arms.py
        if not agent_given(config):  # a conftest's hud_agent names the rows, not "random"
            self.agent_name = conftest_agent(config) or self.agent_name
        if not self.is_worker and config.getoption("dist", "no") != "no":
            for spec in options.agents:
                _preflight_agent(spec)  # workers cannot stop the session: check here
        if not self.is_worker:
            _preflight_runtime(options.runtime)
        self.identity = RunIdentity(config, options, self.agent_name)
        self.expect = self._load_expectations()
        self.arm_expect = {arm.letter: self._load_expectations(arm) for arm in self.arms}
        self.baseline = self._load_baseline()
        self.rows: dict[str, rep.Row] = {}
        self.other_failures = 0
        self.gates: list[rep.Gate] = []
        self.verdict: Verdict | None = None  # set at sessionfinish
        self.finished: set[str] = set()  # node ids whose teardown was reported
        self.order: list[str] = []  # the session's items, in test order
        #: why the session fails beside its gates (a dataset that could not be written)
        self.failures: list[str] = []
        self.sigterm: SignalHandler = None  # the SIGTERM handler to restore at unconfigure
        if not self.is_worker and options.results is not None:
            self.identity.collect()  # the results' provenance (a ledger's feature asks too)

    @property
    def videos(self) -> Path:
        """Where this session writes episode videos (the only folder a report embeds from)."""
        return self.artifacts / "videos"

    @property
    def agent_label(self) -> str:
        return self.identity.label

    # -- the session's agent and provider ------------------------------------------------
    @property
    def agent(self) -> Agent:
        return self.load_agent()

    def load_agent(self, spec: AgentSpec | None = None) -> Agent:
        """The --hud-agent (or another arm's ``spec``), loaded once; a failure is one
        UsageError (collection calls this before any item runs, so it ends the session
        instead of erroring every item)."""
        given = self.options.agent if spec is None else spec
        if given not in self._agents:
            from pytest_hud.errors import AgentSpecError
            from pytest_hud.robot.agent.registry import load_agent

            parsed = given.seeded(self.options.seed)  # random: reproducible
            error = self._agent_errors.get(given)
            if error is not None:  # one attempt per session, not one per item
                raise pytest.UsageError(error)
            try:
                held = self.config.hook.pytest_hud_agent(config=self.config, spec=parsed.text)
                with heap.long_lived(freeze=self.outermost):  # lives as long as we do
                    cluster = self.options.runtime.cluster  # openpi:ray:NAME's
                    agent = held or load_agent(parsed, cluster=cluster)
                self._agents[given] = agent
            except AgentSpecError as exc:
                error = f"--hud-agent={parsed.text}: {exc}"
            except Exception as exc:  # a user factory that raises: its type and message
                error = (
                    f"--hud-agent={parsed.text}: building the agent raised "
                    f"{type(exc).__name__}: {exc}"
                )
            if error is not None:
                self._agent_errors[given] = error
                raise pytest.UsageError(error)
        return self._agents[given]

    def progress_line(self) -> ProgressLine | None:
        """A live ``[123 steps, 4.2s]`` after the test id, in ``-v`` on a terminal only;
        erased before pytest writes the outcome, so its output stays intact."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None or self.is_worker or self.config.option.verbose < 1:
            return None
        tw = terminal_writer(tr)
        if not getattr(tr, "isatty", False):
            return None
        return ProgressLine(tw)

    def default_provider(self) -> Provider:
        """The plugin's ``hud_provider``: one object per session (the one rollouts use
        is the one :meth:`prime` booted ahead for)."""
        if self._provider is None:
            self._provider = provider_for(self.options.runtime, self.options.shared)
        return self._provider

    def _load_expectations(self, arm: Arm | None = None) -> Expectations:
        """The --hud-expect rules of the session's agent, or of one arm's (its tables by
        its label, a sweep's step, then by its spec)."""
        if self.options.expect is None:
            return Expectations()
        names = [self.options.checkpoint or "", self.agent_name]
        if arm is not None:
            names = [arm.label, arm.spec.text]
        try:
            return Expectations.load(self.options.expect, names)
        except ExpectError as exc:
            raise pytest.UsageError(str(exc)) from None

    def _load_baseline(self) -> rep.ResultsDocument | None:
        if self.options.baseline is None:
            return None
        try:
            return rep.load_baseline(self.options.baseline, force=self.options.baseline_force)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None

    def attach(self, item: pytest.Item, result: RolloutResult) -> None:
        item.stash[RESULT] = result

    def make_scheduler(
        self, config: pytest.Config, log: object
    ) -> HudBlockScheduling | HudLoadScheduling | HudDroppingScheduling | None:
        """With ``--dist load``: where a feature decides items before they run (a sequential
        test), small hand-outs that drop the decided ones (``pytest_hud_decided``); where
        items must stay in test order (recorded parts concatenate), contiguous blocks; with
        concurrency > 1, queues at least as deep as the concurrency so each worker's
        lookahead has items to start."""
        if config.getoption("dist", "no") != "load":
            return None
        if self.options.drops_items:

            def decided(nodeid: str) -> str | None:
                reason: str | None = config.hook.pytest_hud_decided(config=config, nodeid=nodeid)
                return reason

            return dropping_scheduler(config, log, decided)
        if self.options.in_order:
            return HudBlockScheduling(config, log)
        if self.options.concurrency < 2:
            return None
        ahead = spec_pool_size(self.options.runtime, self.options.warm, self.options.concurrency)
        depth = self.options.concurrency + (0 if self.options.shared else ahead)
        return HudLoadScheduling(config, log, width=depth)  # the warm pool plans from it


def restore_auth(session: HudSession) -> None:
    """Undo :func:`_session_auth`'s ``--hud-no-auth`` switch (the secret stays: this
    process's children may outlive the session)."""
    from pytest_hud.plumbing.auth import NO_AUTH_ENV

    if session.no_auth_before is None:
        os.environ.pop(NO_AUTH_ENV, None)
    else:
        os.environ[NO_AUTH_ENV] = session.no_auth_before


def _session_auth(no_auth: bool, worker: bool) -> None:
    """The session's secret, made here so xdist's workers and every process started later
    inherit it (:mod:`pytest_hud.plumbing.auth`); or, under ``--hud-no-auth``, the switch that turns
    the servers' checks off, said loudly once."""
    from pytest_hud.plumbing.auth import NO_AUTH_ENV, session_secret, warn_no_auth

    if no_auth:
        os.environ[NO_AUTH_ENV] = "1"
        if not worker:
            warn_no_auth("every server this session starts")
    else:
        session_secret()


def _preflight_runtime(spec: RuntimeSpec) -> None:
    """The backend's check before any item (runtime/backends.py: an engine that answers, the
    base images build FROM, with progress on the terminal): its failure is one usage error
    (exit 4), not an ERROR on every item."""
    from pytest_hud.errors import SubstrateError

    check = spec.backend.parts.preflight
    if check is None:
        return
    try:
        check(spec, _say)
    except (SubstrateError, ImportError) as exc:  # no engine, no SDK, no base image
        raise pytest.UsageError(f"--hud-runtime={spec.raw}: {exc}") from None


def sweep_runtime(spec: RuntimeSpec) -> None:
    """On the controller at unconfigure (xdist has torn its workers down by then): the
    backend's sweep of what dead owners left (docker: their containers); other backends'
    children die with their worker. A sweep that fails is let be: with no engine to
    reach, nothing of ours can be running there."""
    reap = spec.backend.parts.reap
    if reap is not None:
        with contextlib.suppress(Exception):
            reap()


def _say(line: str) -> None:
    print(f"pytest-hud: {line}", file=sys.stderr, flush=True)


def _preflight_agent(spec: AgentSpec) -> None:
    from pytest_hud.errors import AgentSpecError
    from pytest_hud.robot.agent.registry import preflight

    try:
        preflight(spec)
    except AgentSpecError as exc:
        raise pytest.UsageError(f"--hud-agent={spec.text}: {exc}") from None
