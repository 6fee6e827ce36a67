"""docs/reference/architecture.md matches the tree: every module or folder it names under
pytest_hud/ exists, and every package of pytest_hud is named (a new package must be placed on
the page; a moved module fails here until the page follows).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest_hud

PACKAGE = Path(pytest_hud.__file__).parent
PAGE = PACKAGE.parent / "docs" / "reference" / "architecture.md"
#: A path in backticks or in the layer drawing: ``runtime/backends.py``, ``features/``.
NAMED = re.compile(r"(?<![\w/.])((?:[a-z_][\w]*/)*[a-z_][\w]*(?:\.py|/))(?=[`\s:,)]|$)")
#: Paths the page names that are not under pytest_hud/.
ELSEWHERE = ("tests/", "docs/", "scripts/", "pytest_hud/")


def named() -> set[str]:
    text = PAGE.read_text()
    return {m for m in NAMED.findall(text) if not m.startswith(ELSEWHERE)}


def test_the_page_names_paths_at_all() -> None:
    """The pattern finds the page's paths (a broken one would pass both tests below)."""
    found = named()
    assert {"runtime/backends.py", "features/", "plumbing/", "robot/wire/codec.py"} <= found


def test_every_path_the_page_names_exists() -> None:
    missing = sorted(p for p in named() if not (PACKAGE / p).exists())
    assert not missing, f"{PAGE.name} names paths that are not under pytest_hud/: {missing}"


def test_every_package_is_named() -> None:
    found = named()
    packages = sorted(
        f"{d.relative_to(PACKAGE).as_posix()}/"
        for d in PACKAGE.rglob("*")
        if d.is_dir() and (d / "__init__.py").exists()
    )
    packages = [p for p in packages if not (p.startswith("suites/") and p.count("/") > 2)]
    absent = [p for p in packages if p not in found]
    assert not absent, f"{PAGE.name} does not name these packages: {absent}"


def test_the_command_lines_docstring_lists_every_command() -> None:
    """``python -m pytest_hud``'s docstring names each command its table runs, and each
    command's module has its ``main(argv)``."""
    import importlib

    from pytest_hud import __main__ as entry

    doc = entry.__doc__ or ""
    listed = {line.split()[0] for line in doc.splitlines() if line.startswith("    ")}
    assert listed == set(entry.COMMANDS), (listed, set(entry.COMMANDS))
    for module, _ in entry.COMMANDS.values():
        assert callable(getattr(importlib.import_module(module), "main", None)), module
