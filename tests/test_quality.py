"""The project's own standards, checked in CI: ruff clean and formatted, mypy on the API."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
