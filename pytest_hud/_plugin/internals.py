"""Every read of pytest's and xdist's private attributes, in one module, each exercised by
tests/plugin/test_internals_guard.py; also the schedulers that keep workers' queues deep enough
for rollout lookahead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import pytest
from _pytest._io import TerminalWriter
from xdist.scheduler import LoadScheduling

__all__ = [
    "XDIST_SCHEDULER_ATTRS",
    "HudBlockScheduling",
    "HudDroppingScheduling",
    "HudLoadScheduling",
    "binding_key",
    "defines_fixture",
    "dropping_scheduler",
    "from_controller",
    "hand_to_workers",
    "is_worker",
    "keep_xdist_groups",
    "report_dropped",
    "settle_setup",
    "terminal_writer",
    "uses_fixture_from",
    "worker_exitcode",
    "worker_id",
    "worker_node_id",
    "worker_output",
    "xdist_interactor",
    "xdist_upcoming",
]

#: LoadScheduling's private state the schedulers below read or call (the guard test
#: checks each on a real LoadScheduling).
XDIST_SCHEDULER_ATTRS = (
    "node2pending",
    "node2collection",
    "pending",
    "collection",
    "nodes",
    "collection_is_completed",
    "_send_tests",
    "_check_nodes_have_same_collection",
)


class _Popen(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...


class _GatewayIO(Protocol):
    popen: _Popen


class _Gateway(Protocol):
    id: str
    _io: _GatewayIO  # execnet's, private: read only in worker_exitcode


class WorkerNode(Protocol):
    """The controller's handle on a worker (xdist's WorkerController), as read here."""

    gateway: _Gateway
    workerinput: dict[str, object]
    shutting_down: bool

    def shutdown(self) -> None: ...


class _Queue(Protocol):
    def lock(self) -> AbstractContextManager[Iterable[int]]: ...


class XdistInteractor(Protocol):
    """xdist's WorkerInteractor plugin in a worker: the item it runs next and its queue."""

    nextitem_index: int | None
    torun: _Queue


#: what :func:`binding_key` gives: per fixture, its definition's id and its cache scope
BindingKey = tuple[tuple[int, str] | None, ...]


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (xdist sets ``config.workerinput``)."""
    return hasattr(config, "workerinput")


def worker_id(config: pytest.Config) -> str:
    """This xdist worker's id (``gw0``, ...)."""
    return str(config.workerinput["workerid"])  # type: ignore[attr-defined]


def worker_output(config_or_node: object) -> dict[str, Any]:
    """xdist's ``workeroutput``: a worker's config writes it, the controller's node reads it
    (empty where there is none: no xdist, or a worker that died before sending it)."""
    output = getattr(config_or_node, "workeroutput", None)
    return output if isinstance(output, dict) else {}


def worker_node_id(node: WorkerNode) -> str:
    """The id (``gw0``, ...) of the controller's WorkerController ``node`` (``gateway.id``)."""
    return str(node.gateway.id)


def worker_exitcode(node: WorkerNode | None, timeout: float = 10.0) -> int | None:
    """How the worker process behind ``node`` ended (``-9``: SIGKILL), waiting at most
    ``timeout`` seconds for it to be reaped; None when it cannot be told (execnet's
    ``gateway._io.popen`` moved, or the process still runs)."""
    if node is None:
        return None
    try:
        popen = node.gateway._io.popen
        return int(popen.wait(timeout))
    except Exception:
        return None


def terminal_writer(terminalreporter: pytest.TerminalReporter) -> TerminalWriter:
    """The terminal reporter's TerminalWriter (``_tw``), for the live progress line."""
    return terminalreporter._tw


def xdist_interactor(config: pytest.Config) -> XdistInteractor | None:
    """xdist's WorkerInteractor plugin in a worker (None elsewhere)."""
    if not is_worker(config):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


def xdist_upcoming(interactor: XdistInteractor, session: pytest.Session) -> list[str]:
    """Items this worker has been handed but not started (xdist's queue, read-only)."""
    try:
        indices = [interactor.nextitem_index]
        with interactor.torun.lock() as queued:
            indices.extend(queued)
        return [session.items[i].nodeid for i in indices if isinstance(i, int)]
    except Exception:  # xdist internals moved: no lookahead, still correct
        return []


def binding_key(item: pytest.Item) -> BindingKey:
    """Equal for items whose ``hud_provider`` and ``hud_agent`` fixtures resolve to the
    same objects: the same fixture definitions, cached in the same scope instance."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    module = item.nodeid.split("::")[0]
    klass = item.getparent(pytest.Class)
    scopes = {
        "session": "",
        "package": str(item.path.parent),
        "module": module,
        "class": klass.nodeid if klass is not None else module,
    }
    key: list[tuple[int, str] | None] = []
    for name in ("hud_provider", "hud_agent"):
        chain = defs.get(name) or ()
        if not chain:
            key.append(None)
            continue
        fixturedef = chain[-1]
        key.append((id(fixturedef), scopes.get(fixturedef.scope, item.nodeid)))
    return tuple(key)


def uses_fixture_from(item: pytest.Item, name: str, module: str) -> bool:
    """Does ``item``'s fixture ``name`` resolve to the definition in ``module`` (not to
    a conftest or test-module override)?"""
    info = getattr(item, "_fixtureinfo", None)
    chain = (getattr(info, "name2fixturedefs", {}) if info is not None else {}).get(name) or ()
    if not chain:
        return False
    defined = getattr(chain[-1], "func", None)
    return getattr(defined, "__module__", None) == module


class HudLoadScheduling(LoadScheduling):
    def __init__(self, config: pytest.Config, log: object = None, *, width: int = 1) -> None:
        super().__init__(config, log)
        self.width = width

    def _top_up(self, node: WorkerNode) -> None:
        pending = self.node2pending.get(node)
        if pending is None or node.shutting_down or not self.pending:
            return
        missing = self.width - len(pending)
        if missing > 0:
            self._send_tests(node, min(missing, len(self.pending)))

    def schedule(self) -> None:
        super().schedule()
        for node in list(self.node2pending):
            self._top_up(node)

    def check_schedule(self, node: WorkerNode, duration: float = 0) -> None:
        self._top_up(node)
        super().check_schedule(node, duration)


class HudBlockScheduling(LoadScheduling):
    """Each worker gets one contiguous block of the items, in order (used when recording).

    Concatenating the workers' dataset parts in block order then gives episodes in test
    order. Blocks trade xdist's load balancing for that order.
    """

    collection: list[str] | None  # LoadScheduling's: the node ids, once all workers collected

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection = list(next(iter(self.node2collection.values())))
        self.collection = collection
        self.pending[:] = range(len(collection))
        nodes = list(self.nodes)
        total = len(self.pending)
        for i, node in enumerate(nodes):
            size = total // len(nodes) + (1 if i < total % len(nodes) else 0)
            if size:
                self._send_tests(node, size)
        for node in nodes:
            node.shutdown()


class HudDroppingScheduling(LoadScheduling):
    """Items a feature may decide before they run (a sequential test), under ``-n``: small
    hand-outs, decided items dropped.

    xdist's load scheduling sends a quarter of the collection up front; once sent, an
    item runs (telling a worker to skip would need a controller-to-worker channel
    xdist does not have). So this scheduler keeps every worker at two pending items
    (a worker runs an item only once it holds the next one, or is shut down) and,
    before each hand-out, asks ``drop(nodeid)`` for every pending index: a decided
    item is reported skipped by the session and never sent. The controller calls
    ``check_schedule`` after each finished item (``mark_test_complete``), after the
    item's reports went through ``pytest_runtest_logreport``, where decisions are made.
    """

    collection: list[str] | None  # LoadScheduling's: the node ids, once all workers collected

    def __init__(
        self, config: pytest.Config, log: object = None, *, drop: Callable[[str], bool]
    ) -> None:
        super().__init__(config, log)
        self.drop = drop

    def _prune(self) -> None:
        if self.collection is None:
            return
        self.pending[:] = [i for i in self.pending if not self.drop(self.collection[i])]

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is None:
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = list(next(iter(self.node2collection.values())))
            self.pending[:] = range(len(self.collection))
        for node in self.nodes:
            self.check_schedule(node)
        if not self.pending:  # a worker holding one item runs it only once shut down
            for node in self.nodes:
                if not node.shutting_down:
                    node.shutdown()

    def check_schedule(self, node: WorkerNode, duration: float = 0) -> None:
        if node.shutting_down:
            return
        self._prune()
        if self.pending:
            missing = 2 - len(self.node2pending[node])
            if missing > 0:
                self._send_tests(node, min(missing, len(self.pending)))
        else:
            node.shutdown()


def report_dropped(config: pytest.Config, nodeid: str, reason: str) -> None:
    """Report an item the xdist controller drops (it never reaches a worker) as skipped
    with ``reason``: its setup and teardown reports, as a worker would send them."""
    path = nodeid.split("::", 1)[0]
    hook = config.hook
    hook.pytest_runtest_logstart(nodeid=nodeid, location=(path, None, nodeid))
    for when, outcome, longrepr in (
        ("setup", "skipped", (path, None, f"Skipped: {reason}")),
        ("teardown", "passed", None),
    ):
        report = pytest.TestReport(
            nodeid,
            (path, None, nodeid),  # type: ignore[arg-type]  # no line in the controller
            {},
            outcome,  # type: ignore[arg-type]
            longrepr,  # type: ignore[arg-type]
            when,  # type: ignore[arg-type]
            duration=0.0,
        )
        hook.pytest_runtest_logreport(report=report)
    hook.pytest_runtest_logfinish(nodeid=nodeid, location=(path, None, nodeid))


def dropping_scheduler(
    config: pytest.Config, log: object, decided: Callable[[str], str | None]
) -> HudDroppingScheduling | None:
    """The scheduler of a session whose features decide items early (``drops_items``: a
    sequential test) under ``--dist load``: before each hand-out, an item ``decided(nodeid)``
    gives a reason for is reported skipped with it here (it never reaches a worker) and
    dropped. None under any other ``--dist`` (xdist's own scheduler)."""
    if config.getoption("dist", "no") != "load":
        return None

    def drop(nodeid: str) -> bool:
        reason = decided(nodeid)
        if reason is None:
            return False
        report_dropped(config, nodeid, reason)
        return True

    return HudDroppingScheduling(config, log, drop=drop)


def keep_xdist_groups(config: pytest.Config, items: list[pytest.Item]) -> int:
    """``--dist loadgroup`` on a worker: give each ``xdist_group`` item the ``@group``
    suffix xdist's controller groups by, where xdist's own renaming did not take (it sets
    ``item._nodeid``, which pytest 9.2's structured ids no longer read: pytest-xdist
    #1386). Without it a group's items, a Shared substrate's, go to any worker. Returns
    how many it renamed."""
    if not getattr(config.option, "loadgroup", False):
        return 0
    from _pytest.nodeid import coerce_node_id

    renamed = 0
    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
        if not names or item.nodeid.rfind("@") > item.nodeid.rfind("]"):
            continue  # no group, or xdist's suffix took
        item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(sorted(names))}")  # type: ignore[attr-defined]
        renamed += 1
    return renamed


def hand_to_workers(node: WorkerNode, key: str, value: object) -> None:
    """Controller side of ``pytest_configure_node``: ``value`` reaches the worker's
    ``config.workerinput[key]`` (xdist sends ``node.workerinput`` when it starts it)."""
    node.workerinput[key] = value


def from_controller(config: pytest.Config, key: str) -> Any:
    """In an xdist worker, what the controller handed it under ``key`` (else None)."""
    return getattr(config, "workerinput", {}).get(key)


#: the module defining the plugin's own fixtures (hud_agent, hud_provider, ...)
OUR_FIXTURES = "pytest_hud.fixtures"


def overriding_plugin(config: pytest.Config, fixture: str) -> object | None:
    """The first conftest (or other plugin) defining ``fixture`` beside the plugin's own."""
    plugins = config.pluginmanager.get_plugins()
    return next((p for p in plugins if defines_fixture(p, fixture, OUR_FIXTURES)), None)


def conftest_agent(config: pytest.Config) -> str | None:
    """``PATH::hud_agent`` for the conftest (or other plugin) that overrides the plugin's
    ``hud_agent`` fixture, for rows to name; None when none does."""
    plugin = overriding_plugin(config, "hud_agent")
    if plugin is None:
        return None
    where = getattr(plugin, "__file__", None)
    if where is None:
        return f"{getattr(plugin, '__name__', type(plugin).__name__)}::hud_agent"
    path = Path(where)
    with contextlib.suppress(ValueError):
        path = path.relative_to(config.rootpath)
    return f"{path.as_posix()}::hud_agent"


def defines_fixture(plugin: object, name: str, besides: str) -> bool:
    """Whether a plugin or conftest module defines fixture ``name`` other than the one in
    module ``besides`` (pytest >= 8.4 wraps a fixture in a ``FixtureFunctionDefinition``
    holding ``_fixture_function``; older ones mark the function itself)."""
    obj = getattr(plugin, name, None)
    if not (hasattr(obj, "_fixture_function_marker") or hasattr(obj, "_pytestfixturefunction")):
        return False
    func = getattr(obj, "_fixture_function", obj)
    return getattr(func, "__module__", None) != besides


def settle_setup(session: pytest.Session, item: pytest.Item) -> None:
    """Tear down the fixtures' collectors ``item`` does not descend from. pytest tears down
    after each item toward the item it was told comes next; a loop that reorders items as
    they run (an operator putting a row off) settles the stack before the item that does
    come next."""
    session._setupstate.teardown_exact(item)
