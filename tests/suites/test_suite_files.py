"""The shipped ``tasks.jsonl`` files are what their suites' rows functions say: every suite
package's table (``SUITE_FILES`` in its ``tasks`` module), regenerated into a temp folder by
the one writer ``scripts/write_suites.py`` uses, equals the shipped files byte for byte, and
every shipped file is in a table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_hud.suites.files import ROOT, rows_text, suite_tables, write_suites

REPO = Path(__file__).resolve().parents[2]


def test_every_shipped_file_is_what_its_rows_say(tmp_path: Path) -> None:
    written = write_suites(tmp_path)
    assert written, "no suite table found"
    for path in written:
        shipped = ROOT / path.relative_to(tmp_path)
        assert shipped.read_text() == path.read_text(), (
            f"{shipped.relative_to(REPO)} differs from its rows; fix: scripts/write_suites.py"
        )
        assert shipped.parent.joinpath("__init__.py").exists(), "--pyargs needs a package"
    tabled = {ROOT / p.relative_to(tmp_path) for p in written}
    untabled = sorted(str(p.relative_to(REPO)) for p in set(ROOT.rglob("tasks.jsonl")) - tabled)
    assert not untabled, f"shipped but in no SUITE_FILES table: {untabled}"


def test_the_suites_with_tables() -> None:
    tables = suite_tables()
    for name in ("metaworld", "robosuite", "gymnasium_robotics", "gym_hil"):
        module, files = tables[name]
        assert module == f"pytest_hud.suites.{name}"
        assert all(path.name == "tasks.jsonl" for path, _ in files.values())


def test_rows_text_puts_the_module_at_the_top_level() -> None:
    from pytest_hud import Task

    text = rows_text("m.x", [Task("e", "t", {"seed": 1}, metadata={"module": "m.x"})])
    assert text.endswith("\n") and text.count("\n") == 1
    assert '"module": "m.x"' in text and "metadata" not in text


def test_the_maintainer_script_rewrites_the_files_in_place(tmp_path: Path) -> None:
    """scripts/write_suites.py --into DIR writes the same files (it rewrites the shipped ones
    without --into) and lists what it wrote."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "write_suites.py"), "--into", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.split()
    assert listed and all(Path(p).is_file() for p in listed)
    assert {Path(p) for p in listed} == set(tmp_path.rglob("tasks.jsonl"))


def test_no_row_package_takes_a_name_its_suite_module_defines() -> None:
    """A row package imported (``pytest --pyargs pytest_hud.suites.genesis.reach``) becomes
    an attribute of its suite module: named as a template there, it would stand where the
    template stood, and ``rows()`` would meet a module (it did, for Genesis's FrankaReach)."""
    import ast
    import importlib.util

    for name, (module, files) in suite_tables().items():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        tree = ast.parse(Path(spec.origin).read_text())
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        } | {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        clash = sorted(key.split("/")[0] for key in files if key.split("/")[0] in defined)
        assert not clash, f"{name}: row packages named as {module}'s own names: {clash}"
