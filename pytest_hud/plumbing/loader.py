"""One module loader for every layer: files imported under a name ``sys.path`` cannot resolve are
remembered (:data:`PATH_MODULES`) so a sim process can load them the same way.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import itertools
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "PATH_MODULES",
    "load_module",
    "load_object",
    "load_path",
    "names_a_file",
    "registered",
]

_FRESH = itertools.count(1)

#: Modules imported from a file path under a name sys.path cannot resolve; a sim
#: process loads these files under the same names before unpickling its spec.
PATH_MODULES: dict[str, str] = {}


def registered(group: str) -> dict[str, metadata.EntryPoint]:
    """The entry points of ``group`` the installed distributions declare, by name. Read once
    per group and ``sys.path``: each scan reads every distribution's metadata, and a session
    asks for the agent and sim kinds several times."""
    return _registered(group, tuple(sys.path))


@functools.lru_cache(maxsize=8)
def _registered(group: str, path: tuple[str, ...]) -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def load_path(path: str | Path, name: str | None = None) -> object:
    """Import a Python file as module ``name`` (default: its stem) and remember the mapping."""
    path = Path(path).resolve()
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    PATH_MODULES[name] = str(path)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        PATH_MODULES.pop(name, None)
        raise
    return module


def load_object(ref: str) -> Any:
    """Import ``module:attr`` or ``path/file.py:attr``."""
    modname, sep, attr = ref.rpartition(":")
    if not sep or not modname or not attr:
        raise ValueError(f"expected MODULE:NAME or FILE.py:NAME, got {ref!r}")
    if modname.endswith(".py") or "/" in modname:
        module = load_path(modname)
    else:
        module = importlib.import_module(modname)
    obj: object = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def names_a_file(target: str) -> bool:
    """Whether :func:`load_module` reads ``target`` as a file path (else a dotted name)."""
    return target.endswith(".py") or "/" in target or Path(target).exists()


def load_module(target: str | Path, *, fresh: bool = False) -> Any:
    """Import an env module by file path or dotted name; ``fresh`` imports a new copy."""
    text = str(target)
    if names_a_file(text):
        path = Path(text).resolve()
        if not path.exists():
            raise FileNotFoundError(f"env module {path} does not exist")
        name = f"pytest_hud_env_{next(_FRESH)}_{path.stem}" if fresh else path.stem
        known = sys.modules.get(name) if not fresh else None
        if known is not None and Path(getattr(known, "__file__", "") or "").resolve() == path:
            return known
        return load_path(path, name)
    module = importlib.import_module(text)
    file = getattr(module, "__file__", None)
    if fresh and file:
        return load_module(file, fresh=True)
    return module
