"""pytest-hud's public hooks (pytest_hud/hookspecs.py) and its feature plugins: a
conftest's hookimpl sees every finished rollout, with and without xdist; each feature
plugin is registered only when its option is given and unregistered at unconfigure,
and works alone; the session is one plain object, not a stack of mixins."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import pytest_hud
from pytest_hud._plugin.identity import RunIdentity
from pytest_hud._plugin.options import HudOptions
from pytest_hud._plugin.session import HudSession
from pytest_hud.evaluation import ledger_file as ledger
from pytest_hud.evaluation.results import Row
from pytest_hud.features.ledger import LedgerPlugin
from pytest_hud.features.sequential import SequentialPlugin

FLIP_ENV = """
from pytest_hud import Environment

env = Environment("flip")


@env.template()
async def flip(seed: int = 0):
    yield {"prompt": f"flip {seed}"}
    yield {"score": float(seed % 2 == 0), "success": seed % 2 == 0}
"""

CONFTEST = """
import json
import os

import pytest

import flip_env  # noqa: F401  (declares the env for --hud-runtime=local)


@pytest.fixture(scope="session")
def hud_agent():
    async def agent(run):  # the template has no robot: nothing to act on
        return {}

    return agent


def pytest_hud_row(row):
    row["tracker"] = "mine"


def pytest_hud_rollout_finished(row, report):
    line = {
        "nodeid": row["nodeid"],
        "outcome": row["outcome"],
        "success": row["success"],
        "tracker": row.get("tracker"),
        "worker": os.environ.get("PYTEST_XDIST_WORKER"),
        "report": report.nodeid,
    }
    with open(os.environ["HUD_TRACKER_LOG"], "a") as f:
        f.write(json.dumps(line) + "\\n")
"""

TESTS = """
import pytest
from flip_env import flip


@pytest.mark.hud(tasks=[flip.task(seed=s) for s in range(4)])
def test_flip(hud_result):
    assert hud_result.success, hud_result.summary()
"""


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_conftest_hook_receives_every_finished_rollout(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    pytester.makepyfile(flip_env=FLIP_ENV, test_flip=TESTS)
    pytester.makeconftest(CONFTEST)
    log = pytester.path / "tracker.jsonl"
    monkeypatch.setenv("HUD_TRACKER_LOG", str(log))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test's own worker's
    out = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--hud-results={out}", *xdist, timeout=240
    )
    result.assert_outcomes(passed=2, failed=2)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == 4, lines  # once per rollout, whichever process ran it
    assert sorted(x["outcome"] for x in lines) == ["failed", "failed", "passed", "passed"]
    assert all(x["success"] is (x["outcome"] == "passed") for x in lines), lines
    assert len({x["nodeid"] for x in lines}) == 4
    assert all(x["report"] == x["nodeid"] for x in lines)
    assert all(x["worker"] is None for x in lines), lines  # the controller under xdist
    # pytest_hud_row ran where the item ran; its field reached the hook and the JSON
    assert all(x["tracker"] == "mine" for x in lines), lines
    doc = json.loads(out.read_text())
    assert [r["tracker"] for r in doc["rollouts"]] == ["mine"] * 4


def _features(config: pytest.Config) -> set[str]:
    return {
        name
        for name, _ in config.pluginmanager.list_name_plugin()
        if name and name.startswith("pytest-hud-")
    }


def test_feature_plugins_are_registered_only_when_enabled(pytester: pytest.Pytester) -> None:
    plain = pytester.parseconfigure()
    always = {"pytest-hud-session", "pytest-hud-abandoned", "pytest-hud-wrap", "pytest-hud-videos"}
    always.add("pytest-hud-robots")  # an ungraded robot episode is an ERROR in every run
    always.add("pytest-hud-preflight")  # --hud-preflight=warn by default
    always.add("pytest-hud-devices")  # it places each process's models on a device
    assert _features(plain) - {"pytest-hud-html"} == always
    assert plain.pluginmanager.get_plugin("pytest-hud-ledger") is None
    plain._ensure_unconfigure()
    off = pytester.parseconfigure("--hud-preflight=off")
    assert off.pluginmanager.get_plugin("pytest-hud-preflight") is None
    off._ensure_unconfigure()

    path = pytester.path / "run.ledger.jsonl"
    config = pytester.parseconfigure(
        f"--hud-ledger={path}", "--hud-gate=sequential", "--hud-min-success=0.5"
    )
    assert isinstance(config.pluginmanager.get_plugin("pytest-hud-ledger"), LedgerPlugin)
    assert isinstance(config.pluginmanager.get_plugin("pytest-hud-sequential"), SequentialPlugin)
    assert config.pluginmanager.get_plugin("pytest-hud-compare") is None
    config._ensure_unconfigure()
    assert config.pluginmanager.get_plugin("pytest-hud-ledger") is None
    assert config.pluginmanager.get_plugin("pytest-hud-sequential") is None
    assert ledger.read(path).runs  # the run line was written, and the file closed


def _row(nodeid: str, success: bool) -> Row:
    outcome = "passed" if success else "failed"
    return Row(nodeid=nodeid, outcome=outcome, key="line/reach", success=success, error=None)


def test_the_sequential_plugin_alone_decides_and_skips(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig("--hud-gate=sequential", "--hud-min-success=0.5")
    options = HudOptions.from_config(config)
    order = [f"test_x.py::test_x[line/reach[{i}]]" for i in range(16)]
    seq = SequentialPlugin(options, lambda: order, None, pytester.path / "cache")
    for nodeid in order[:6]:
        row = _row(nodeid, True)
        seq.pytest_hud_row(row)
        assert row["bar"] == 0.5
        assert seq.pytest_hud_skip_case(order[-1]) is None
        seq.pytest_hud_rollout_finished(row)
    reason = seq.pytest_hud_skip_case(order[-1])
    assert reason is not None and "above" in reason.lower(), reason
    (gate,) = seq.pytest_hud_gates()
    assert gate.passed and gate.name == "sequential test_x.py::test_x[line/reach]", gate


def test_the_ledger_plugin_alone_appends_each_row(pytester: pytest.Pytester) -> None:
    path = pytester.path / "l.jsonl"
    config = pytester.parseconfig()
    identity = RunIdentity(config, HudOptions.from_config(config), "zero")
    failures: list[str] = []
    plugin = LedgerPlugin(path, identity, failures.append)
    plugin.pytest_hud_rollout_finished(_row("t.py::a", True))
    plugin.pytest_hud_rollout_finished(_row("t.py::b", False))
    plugin.close()
    episodes = ledger.read(path).episodes
    assert [e["nodeid"] for e in episodes] == ["t.py::a", "t.py::b"]
    assert plugin.pytest_hud_results_meta() == {"ledger": str(path)}
    assert failures == []


def test_the_session_is_no_stack_of_mixins() -> None:
    assert HudSession.__mro__ == (HudSession, object)
    root = Path(pytest_hud.__file__).parent / "_plugin"
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(b) for b in node.bases]
            if node.name.endswith("Mixin") or any(
                b.endswith(("Mixin", "SessionState", "HudSession")) for b in bases
            ):
                found.append(f"{path.relative_to(root)}: class {node.name}({', '.join(bases)})")
    assert not found, found


def test_hookspecs_are_documented_in_one_line() -> None:
    from pytest_hud import hookspecs

    specs = [getattr(hookspecs, name) for name in hookspecs.__all__]
    assert len(specs) >= 7
    for spec in specs:
        doc = spec.__doc__ or ""
        assert doc and "\n" not in doc.strip(), spec.__name__


def _runtime_imports(path: Path) -> set[str]:
    """The modules ``path`` imports outside ``if TYPE_CHECKING:`` blocks."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def test_hookspecs_and_features_stand_apart() -> None:
    """The public hookspecs import nothing of pytest-hud at runtime (cheap, no cycle);
    the feature plugins never import the hooks module or the session at runtime (each
    is built from plain objects, so it can be tested alone)."""
    root = Path(pytest_hud.__file__).parent
    assert not {m for m in _runtime_imports(root / "hookspecs.py") if m.startswith("pytest_hud")}
    bad = []
    for path in sorted((root / "_plugin" / "features").glob("*.py")):
        for m in _runtime_imports(path):
            if m in ("pytest_hud.plugin", "pytest_hud._plugin.session") or m.startswith(
                "pytest_hud._plugin.session."
            ):
                bad.append(f"{path.name} imports {m}")
    assert not bad, bad
