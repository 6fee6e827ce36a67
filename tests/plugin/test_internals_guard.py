"""Every pytest/xdist private attribute pytest-hud reads, exercised against the installed
versions (all reads live in ``pytest_hud._plugin.internals``). A failure names the
attribute that moved; fix ``internals.py``, nothing else reads them."""

from __future__ import annotations

import pytest
from _pytest.terminal import TerminalReporter

from pytest_hud._plugin import internals

WORKER_PROBE = """
import pytest
from pytest_hud._plugin import internals


def missing(obj, names):
    return [n for n in names if not hasattr(obj, n)]


def test_worker_reads(request):
    config = request.config
    assert internals.is_worker(config), "config.workerinput: xdist no longer sets it on workers"
    assert internals.worker_id(config).startswith("gw"), "config.workerinput['workerid'] moved"
    interactor = internals.xdist_interactor(config)
    assert interactor is not None, "xdist's WorkerInteractor plugin (with .torun) not found"
    gone = missing(interactor, ["torun", "nextitem_index"])
    assert not gone, f"WorkerInteractor lost {gone}"
    with interactor.torun.lock() as queued:
        list(queued)
    assert isinstance(internals.xdist_upcoming(interactor, request.session), list)
    assert internals.from_controller(config, "probe") == "handed", "node.workerinput moved"
"""

SCHEDULER_PROBE = """
import json, os
from xdist.scheduler import LoadScheduling
from pytest_hud._plugin import internals


def pytest_xdist_make_scheduler(config, log):
    sched = LoadScheduling(config, log)
    gone = [n for n in internals.XDIST_SCHEDULER_ATTRS if not hasattr(sched, n)]
    with open(os.path.join(str(config.rootpath), "sched.json"), "w") as f:
        json.dump(gone, f)
    return sched


def pytest_configure_node(node):
    internals.hand_to_workers(node, "probe", "handed")
"""


def test_worker_internals_against_installed_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_probe=WORKER_PROBE)
    pytester.makeconftest(SCHEDULER_PROBE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "1", "--dist", "load", timeout=120
    )
    out = result.stdout.str()
    assert result.ret == 0, f"an xdist internal pytest-hud reads moved:\n{out}"
    gone = (pytester.path / "sched.json").read_text()
    assert gone == "[]", f"xdist LoadScheduling lost {gone} (used by internals' schedulers)"


def test_fixtureinfo_read_by_binding_key(request: pytest.FixtureRequest) -> None:
    info = getattr(request.node, "_fixtureinfo", None)
    assert info is not None, "pytest Item._fixtureinfo moved (read by internals.binding_key)"
    assert hasattr(info, "name2fixturedefs"), "FuncFixtureInfo.name2fixturedefs moved"
    key = internals.binding_key(request.node)
    assert key == (None, None)  # this item uses neither hud_provider nor hud_agent


def test_binding_key_sees_the_hud_fixtures(tmp_path, request: pytest.FixtureRequest) -> None:
    defs = request.node._fixtureinfo.name2fixturedefs
    assert "tmp_path" in defs, "name2fixturedefs no longer maps a used fixture to its defs"
    assert defs["tmp_path"][-1].scope == "function", "FixtureDef.scope moved"


def test_terminal_writer(pytestconfig: pytest.Config) -> None:
    reporter = TerminalReporter(pytestconfig)
    assert hasattr(reporter, "_tw"), "TerminalReporter._tw moved (internals.terminal_writer)"
    assert hasattr(internals.terminal_writer(reporter), "write")


CRASH_PROBE = """
import json, os
from pytest_hud._plugin import internals

SEEN = {}


def pytest_sessionfinish(session):
    if internals.is_worker(session.config):
        internals.worker_output(session.config)["probe"] = os.getpid()


def pytest_testnodedown(node, error):
    SEEN.setdefault("outputs", []).append(internals.worker_output(node).get("probe"))


def pytest_handlecrashitem(crashitem, report, sched):
    SEEN["worker"] = internals.worker_node_id(report.node)
    SEEN["exitcode"] = internals.worker_exitcode(report.node)


def pytest_unconfigure(config):
    if not internals.is_worker(config):
        with open(os.path.join(str(config.rootpath), "crash.json"), "w") as f:
            json.dump(SEEN, f)
"""

CRASH_TESTS = """
import os, signal


def test_dies():
    os.kill(os.getpid(), signal.SIGKILL)


def test_lives():
    pass
"""


def test_crash_internals_against_installed_xdist(pytester: pytest.Pytester) -> None:
    """internals.worker_node_id / worker_exitcode (a crashed worker: ``gateway.id``,
    execnet's ``gateway._io.popen``) and worker_output (``workeroutput`` both ways)."""
    import json

    pytester.makepyfile(test_crash=CRASH_TESTS)
    pytester.makeconftest(CRASH_PROBE)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1", "--max-worker-restart=1")
    seen = json.loads((pytester.path / "crash.json").read_text())
    assert seen["worker"] == "gw0", "WorkerController.gateway.id moved"
    assert seen["exitcode"] == -9, "execnet's gateway._io.popen moved (worker_exitcode)"
    assert any(isinstance(pid, int) for pid in seen["outputs"]), "workeroutput moved"


GROUPS_PROBE = """
import os, pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i, request):
    with open(f"worker-{i}", "w") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + " " + request.node.nodeid)

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
"""


def test_an_xdist_group_runs_on_one_worker(pytester: pytest.Pytester) -> None:
    """``--dist loadgroup`` keeps a group on one worker (a Shared substrate's items):
    xdist names grouped items ``...@group`` by setting ``item._nodeid``, which pytest 9.2
    no longer reads (pytest-xdist #1386); :func:`internals.keep_xdist_groups` renames
    them through ``item._id`` where xdist's renaming did not take."""
    pytester.makepyfile(test_groups=GROUPS_PROBE)
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=12)
    seen = [(pytester.path / f"worker-{i}").read_text().split() for i in range(6)]
    assert len({worker for worker, _ in seen}) == 1, seen
    assert all(nodeid.endswith("@shared") for _, nodeid in seen), seen


SETTLE = """
import pytest


@pytest.fixture(scope="module")
def resource():
    yield "set up for this module only"


def test_first(resource, request):
    setup = request.session._setupstate
    assert hasattr(setup, "teardown_exact"), "Session._setupstate.teardown_exact moved"
"""


def test_settle_setup_against_installed_pytest(pytester: pytest.Pytester) -> None:
    """settle_setup reorders safely: an item run out of pytest's predicted order (a row put
    off) sets up after the previous module's fixtures are torn down, not with an assert."""
    pytester.makepyfile(
        test_a=SETTLE,
        test_b="def test_second():\n    pass\n",
        conftest="""
import pytest
from pytest_hud._plugin import internals


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    a, b = session.items
    # run a telling pytest a comes again next (a wrong guess), then b: without settling,
    # b's setup finds test_a's module still set up
    a.config.hook.pytest_runtest_protocol(item=a, nextitem=a)
    internals.settle_setup(session, b)
    b.config.hook.pytest_runtest_protocol(item=b, nextitem=None)
    return True
""",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hud")
    result.assert_outcomes(passed=2)
