"""The one door between the core and a feature (``pytest_hud/features/``): what a feature may
read of the session and the few ways it may act on it. A feature module has

- ``Settings``: a :class:`FeatureSettings` whose :func:`option` fields declare its options (or
  None: it has none),
- ``configure(settings, options) -> HudOptions`` (optional): the session's core options as
  this feature changes them (a runtime, a width, where rollouts boot), returned as a copy,
- ``enable(settings, hud) -> plugin | None``: its plugin object, whose hooks do its work.

A feature imports nothing else of the core: it sees the session through :class:`Hud`, keeps
its own state, and reaches other features only through hooks (``pytest_hud/hookspecs.py``).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Generic, Never, NoReturn, Protocol, TypeVar, overload

import pytest

from pytest_hud._plugin.arms import Arm, agent_given, split_arm, task_of_nodeid
from pytest_hud._plugin.cases import HudCase, readable_id
from pytest_hud._plugin.identity import RunIdentity
from pytest_hud._plugin.internals import (
    OUR_FIXTURES,
    WorkerNode,
    from_controller,
    hand_to_workers,
    is_worker,
    overriding_plugin,
    settle_setup,
    uses_fixture_from,
    worker_exitcode,
    worker_id,
    worker_node_id,
    worker_output,
)
from pytest_hud._plugin.items import is_task_file
from pytest_hud._plugin.module_rows import check_module_columns
from pytest_hud._plugin.options import HudOptions
from pytest_hud._plugin.report_images import Figure, figure_path
from pytest_hud._plugin.settings import (
    FeatureSettings,
    add_options,
    handed,
    option,
    path_option,
    read_settings,
)
from pytest_hud._plugin.state import CASE
from pytest_hud._plugin.video import VideoObserver, write_failures
from pytest_hud.errors import ModuleColumnError

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession
    from pytest_hud.evaluation.results import ResultsDocument, Row
    from pytest_hud.robot.agent.registry import AgentSpec
    from pytest_hud.runtime.provider import Provider
    from pytest_hud.runtime.rollout import Agent

__all__ = [
    "OUR_FIXTURES",
    "Arm",
    "Feature",
    "FeatureSettings",
    "Figure",
    "Gathered",
    "Hud",
    "HudCase",
    "HudOptions",
    "ModuleColumnError",
    "RunIdentity",
    "VideoObserver",
    "WorkerNode",
    "add_options",
    "check_module_columns",
    "handed",
    "is_task_file",
    "option",
    "overriding_plugin",
    "path_option",
    "read_settings",
    "readable_id",
    "settle_setup",
    "split_arm",
    "task_of_nodeid",
    "uses_fixture_from",
    "worker_exitcode",
    "worker_node_id",
    "write_failures",
]

T = TypeVar("T")


class Feature(Protocol):
    """A feature module, as ``pytest_hud/features/__init__.py`` loads it (see the module docs;
    ``configure`` is optional and ``Settings`` may be None)."""

    Settings: type | None

    def enable(self, settings: object, hud: Hud, /) -> object | None: ...


class _Fact(Generic[T]):
    """A fact of the session a feature reads and never sets: ``hud.NAME`` is the session's
    ``NAME``, read when asked."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, hud: None, owner: type) -> _Fact[T]: ...
    @overload
    def __get__(self, hud: Hud, owner: type | None = None) -> T: ...
    def __get__(self, hud: Hud | None, owner: type | None = None) -> T | _Fact[T]:
        if hud is None:
            return self
        value: T = getattr(hud._session, self.name)
        return value

    def __set__(self, hud: Hud, value: Never) -> NoReturn:
        raise AttributeError(f"Hud.{self.name} is the session's, read-only")


class Hud:
    """What a feature sees of the session (see the module docs): facts to read, and the few
    ways to act (``fail``, ``stop_rollouts``, ``run``, the xdist channel)."""

    def __init__(self, session: HudSession) -> None:
        self._session = session

    # -- facts: the session's own, read-only ------------------------------------------------
    config: _Fact[pytest.Config] = _Fact()
    #: The core's options, frozen (as every feature's ``configure`` left them).
    options: _Fact[HudOptions] = _Fact()
    is_worker: _Fact[bool] = _Fact()
    #: The session's own folder (``.hud`` under the rootdir).
    artifacts: _Fact[Path] = _Fact()
    videos: _Fact[Path] = _Fact()
    agent_label: _Fact[str] = _Fact()
    #: The run's agent, checkpoint, provenance and replay commands.
    identity: _Fact[RunIdentity] = _Fact()
    baseline: _Fact[ResultsDocument | None] = _Fact()

    # -- facts derived, or gathered as the session runs -------------------------------------
    @property
    def distributed(self) -> bool:
        """The run has xdist workers (this is one of them, or their controller)."""
        return self.is_worker or self.config.getoption("dist", "no") != "no"

    @property
    def arms(self) -> Sequence[Arm]:
        """Several agents' arms (empty for one agent)."""
        return tuple(self._session.arms)

    @property
    def agent_given(self) -> bool:
        """Whether ``--hud-agent`` (or its ini) named the agent, rather than the default."""
        return agent_given(self.config)

    @property
    def rows(self) -> Mapping[str, Row]:
        """The reported rows by node id (a feature amends a row only in ``pytest_hud_row``
        and ``pytest_hud_finish_rows``)."""
        return MappingProxyType(self._session.rows)

    @property
    def order(self) -> Sequence[str]:
        """The session's items' node ids, in test order (empty before collection ends)."""
        return tuple(self._session.order)

    @property
    def cases(self) -> Mapping[str, HudCase]:
        """The cases whose rollouts run in this process, by node id."""
        return MappingProxyType(self._session.evaluator.cases)

    def case_of(self, item: pytest.Item) -> HudCase | None:
        """The case ``item`` evaluates (None: not a pytest-hud item)."""
        return item.stash.get(CASE, None)

    def figure_path(self, name: str) -> Path:
        """Where the session writes its figure ``name`` (beside the results or the report)."""
        return figure_path(self.config, self.options.results, self.artifacts, name)

    # -- acting -----------------------------------------------------------------------------
    def load_agent(self, spec: AgentSpec | None = None) -> Agent:
        """The session's agent (or an arm's ``spec``), loaded once per process."""
        return self._session.load_agent(spec)

    def fail(self, message: str) -> None:
        """Fail the session beside its gates, saying why (a dataset that was not written)."""
        self._session.failures.append(message)

    def stop_rollouts(self) -> None:
        """End every rollout of this process and leave the substrates (idempotent)."""
        self._session.evaluator.close()

    def provider_of(self, item: pytest.Item) -> Provider | None:
        """The provider ``item``'s rollout will use, where the session knows it before the
        item's fixtures run: the plugin's own ``hud_provider`` (its Shared scope entered,
        as rollouts use it); None for a provider of the user's fixtures."""
        if not uses_fixture_from(item, "hud_provider", OUR_FIXTURES):
            return None
        return self._session.evaluator.entered(self._session.default_provider())

    def submit(self, coro: Coroutine[object, object, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the session's rollout loop without waiting for it (the caller
        bounds its wait on the future, and cancels it)."""
        return self._session.evaluator.loop.submit(coro)

    def run(self, coro: Coroutine[object, object, T], timeout: float) -> T:
        """Run ``coro`` on the session's rollout loop, waiting at most ``timeout`` seconds."""
        try:
            return self._session.evaluator.loop.run(coro, timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"no answer within {timeout:g} s") from None

    # -- the xdist channel ------------------------------------------------------------------
    @property
    def worker_id(self) -> str:
        """This worker's id (``gw0``, ...); only in a worker."""
        return worker_id(self.config)

    def to_controller(self, key: str, lines: list[str]) -> None:
        """In a worker: send ``lines`` to the controller (read there with :meth:`from_worker`)."""
        worker_output(self.config)[key] = list(lines)

    @staticmethod
    def from_worker(node: object, key: str) -> list[str]:
        """On the controller, a finished worker's ``node``: the lines it sent under ``key``
        (none where it sent none, or died first)."""
        sent = worker_output(node).get(key)
        return [str(line) for line in sent] if isinstance(sent, list | tuple) else []

    @staticmethod
    def to_worker(node: WorkerNode, key: str, value: object) -> None:
        """On the controller, a worker about to start: hand it ``value`` under ``key``."""
        hand_to_workers(node, key, value)

    def from_controller(self, key: str) -> object:
        """In a worker: what the controller handed it under ``key`` (else None)."""
        return from_controller(self.config, key) if is_worker(self.config) else None


class Gathered:
    """A feature plugin's base for lines every process of the session finds (:meth:`own`)
    and the controller reports: each xdist worker sends its own under ``KEY`` as its session
    finishes; :meth:`gathered`, on the controller, is the workers' lines, then its own."""

    #: The workeroutput key the workers' lines travel under.
    KEY: ClassVar[str]

    def __init__(self, hud: Hud) -> None:
        self.hud = hud
        self.from_workers: list[str] = []

    def own(self) -> list[str]:
        """This process's lines."""
        raise NotImplementedError

    @pytest.hookimpl  # after the session's own (tryfirst), which closes the rollout loop
    def pytest_sessionfinish(self) -> None:
        """On a worker: send its lines to the controller."""
        if self.hud.is_worker:
            self.hud.to_controller(self.KEY, self.own())

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object) -> None:
        """On the controller, a worker finished: keep the lines it sent."""
        self.from_workers.extend(self.hud.from_worker(node, self.KEY))

    def gathered(self) -> list[str]:
        """On the controller: every worker's lines, then its own."""
        return [*self.from_workers, *self.own()]
