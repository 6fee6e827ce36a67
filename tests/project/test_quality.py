"""The project's own standards, checked in CI: ruff clean and formatted, mypy on the API."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists() and shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return str(path if path.exists() else name)


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    out = subprocess.run(
        [tool("ruff"), *args, "pytest_hud", "tests", "bench", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_on_the_public_api() -> None:
    out = subprocess.run(
        [
            tool("mypy"),
            "pytest_hud/__init__.py",
            "pytest_hud/robot/__init__.py",
            "pytest_hud/plugin.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_tests_mirror_the_package_and_no_test_module_imports_another() -> None:
    """tests/ is folders of test modules (helpers in tests/helpers, on sys.path through
    pyproject's ``pythonpath``); a test module never imports another one: what two
    modules share lives in a helper."""
    tests = ROOT / "tests"
    assert sorted(p.name for p in tests.glob("test_*.py")) == []
    modules = {p.stem for p in tests.glob("*/test_*.py")}
    importing = []
    for path in tests.rglob("*.py"):
        if ".venv" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            importing += [f"{path.relative_to(ROOT)} imports {n}" for n in names if n in modules]
    assert importing == []


def test_no_message_names_a_path_of_this_repository_a_pip_user_lacks() -> None:
    """A pip-installed user has no ``.ci/`` or ``scripts/`` folder: no string in the package
    (every message it can print) names one; each names a command the package has."""
    found = []
    for path in sorted((ROOT / "pytest_hud").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and (".ci/" in text or "scripts/" in text):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]!r}")
    assert not found, "\n".join(found)
