"""A logger created on another thread while pytest walks logging's registry at a test phase
(the dataset writer importing a module on first use did it in CI) is no ERROR."""

from __future__ import annotations

import logging

import pytest
from line_suite import run

from pytest_hud._plugin import loggers

CHURN = """
import logging, threading

for i in range(50):  # pytest attaches its capture to each of these (they do not propagate)
    logging.getLogger(f"quiet.{i}").propagate = False

stop = threading.Event()


def churn():
    manager = logging.Logger.manager
    while not stop.is_set():  # a logger appears (a lazy import) and goes, again and again
        logging.getLogger("churn")
        with logging._lock:
            manager.loggerDict.pop("churn", None)


thread = threading.Thread(target=churn, daemon=True)
thread.start()


def pytest_unconfigure(config):
    stop.set()
    thread.join()
"""


def test_a_thread_making_loggers_through_every_phase_errors_no_item(
    pytester: pytest.Pytester,
) -> None:
    # Without the plugin's registry the same run has failed 1 to 8 of its 300 items with
    # "dictionary changed size during iteration" every time it was tried (pytest 9.2).
    pytester.makeconftest(CHURN)
    pytester.makepyfile(
        test_many="""
import pytest

@pytest.mark.parametrize("i", range(300))
def test_phase(i):
    pass
"""
    )
    result = run(pytester)
    result.assert_outcomes(passed=300)


def _walk_making_loggers(manager: logging.Manager) -> int:
    """pytest's walk over the registry, with a logger made at each step (as a thread can)."""
    seen = 0
    for n, _ in enumerate(manager.loggerDict.values()):
        manager.getLogger(f"made.{n}")
        seen += 1
    return seen


def _manager() -> logging.Manager:
    manager = logging.Manager(logging.RootLogger(logging.WARNING))
    for name in ("a", "a.b", "c"):
        manager.getLogger(name)
    return manager


def test_a_walk_of_the_registry_sees_it_as_it_was_and_no_logger_is_lost() -> None:
    manager = _manager()
    loggers.install(manager)
    assert _walk_making_loggers(manager) == 3
    made = manager.getLogger("made.0")
    loggers.uninstall(manager)
    assert type(manager.loggerDict) is dict
    assert manager.loggerDict["made.0"] is made
    assert {"a", "a.b", "c", "made.0", "made.1", "made.2"} <= set(manager.loggerDict)


def test_the_same_walk_on_logging_s_own_registry_raises() -> None:
    """The failure the registry prevents."""
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        _walk_making_loggers(_manager())


def test_the_plugin_holds_the_registry_while_configured() -> None:
    assert isinstance(logging.Logger.manager.loggerDict, loggers.SnapshotRegistry)


def test_a_nested_session_leaves_the_outer_one_its_registry() -> None:
    """pytest_hud.evaluate() inside a test configures and unconfigures a session of its own."""
    manager = _manager()
    loggers.install(manager)  # the outer session
    loggers.install(manager)  # evaluate()'s
    loggers.uninstall(manager)
    assert isinstance(manager.loggerDict, loggers.SnapshotRegistry)
    loggers.uninstall(manager)
    assert type(manager.loggerDict) is dict
