"""A package's exports imported on first use (PEP 562), declared as plain imports under ``if
TYPE_CHECKING:``, so every substrate's boot skips code it never uses.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["exports"]


def _table(path: str) -> dict[str, tuple[str, str]]:
    """name -> (module, its name there), from the ``from X import a, b as c`` lines under
    ``if TYPE_CHECKING:``."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    table: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if not (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"):
            continue
        for stmt in node.body:  # type: ignore[attr-defined]
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                for alias in stmt.names:
                    table[alias.asname or alias.name] = (stmt.module, alias.name)
    return table


def exports(package: str, path: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` (its ``__init__`` at ``path``).

    A name that is also a submodule's (``runtime.rollout``, the function, and
    ``runtime/rollout.py``) is bound now: importing that submodule binds the package's
    attribute to the module, and a module attribute never reaches ``__getattr__``."""
    table = _table(path)
    here = Path(path).parent
    for name, (module, attr) in table.items():
        if (here / f"{name}.py").exists() or (here / name / "__init__.py").exists():
            setattr(sys.modules[package], name, getattr(importlib.import_module(module), attr))

    def __getattr__(name: str) -> object:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[0]), where[1])
        setattr(sys.modules[package], name, value)  # later lookups skip this hook
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
