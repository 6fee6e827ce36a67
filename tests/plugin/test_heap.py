"""The agent's heap (pytest_hud/_plugin/heap.py): loaded with the collector paused, the
survivors frozen, the load's garbage freed; only by the process's outermost session."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

from pytest_hud._plugin import heap

REPO = Path(__file__).resolve().parents[2]


class Node:
    other: Node | None = None


def test_a_load_runs_with_the_collector_paused_and_its_survivors_are_frozen() -> None:
    frozen = gc.get_freeze_count()
    try:
        with heap.long_lived():
            assert not gc.isenabled()
            kept = [Node() for _ in range(100)]
            a, b = Node(), Node()
            a.other, b.other = b, a  # a cycle the load dropped: garbage
            dropped = weakref.ref(a)
            del a, b
        assert gc.isenabled()
        assert dropped() is None  # collected before the freeze, not made permanent
        assert gc.get_freeze_count() >= frozen + len(kept)
    finally:
        gc.unfreeze()  # this test process goes on: give the objects back to the collector


def test_an_inner_load_does_not_freeze_and_a_paused_collector_stays_paused() -> None:
    gc.disable()
    try:
        frozen = gc.get_freeze_count()
        with heap.long_lived(freeze=False):
            kept = [Node() for _ in range(100)]
        assert gc.get_freeze_count() == frozen and len(kept) == 100
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_only_the_outermost_session_of_a_process_freezes(tmp_path: Path) -> None:
    """A session run in-process inside another (pytester) must not freeze the outer
    process's objects: the outer run's agent load freezes, the inner one's does not."""
    (tmp_path / "conftest.py").write_text("pytest_plugins = ['pytester']\n")
    (tmp_path / "test_outer.py").write_text(
        "import gc, json, os\n"
        "from pytest_hud._plugin.session import session_of\n\n"
        "def test_inner(pytester, pytestconfig):\n"
        "    session_of(pytestconfig).load_agent()\n"
        "    outer = gc.get_freeze_count()\n"
        "    pytester.makepyfile(test_x='def test_x(pytestconfig):\\n"
        "    from pytest_hud._plugin.session import session_of\\n"
        "    session_of(pytestconfig).load_agent()\\n')\n"
        "    pytester.runpytest_inprocess('-p', 'no:randomly').assert_outcomes(passed=1)\n"
        "    gc.collect()\n"
        "    with open(os.environ['OUT'], 'w') as f:\n"
        "        json.dump({'outer': outer, 'after': gc.get_freeze_count()}, f)\n"
    )
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "OUT": str(out), "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counts = json.loads(out.read_text())
    assert counts["outer"] > 0  # the outer session froze its agent's heap
    assert counts["after"] <= counts["outer"]  # the inner session froze nothing more
