"""Expectations per agent or checkpoint: a TOML/YAML file of task globs expected to fail
(``xfail``) or skipped, one table per agent name (``*`` for all).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from pytest_hud.errors import ExpectError
from pytest_hud.plumbing.parsing import parse_errors_as

__all__ = ["ExpectError", "Expectations"]


@dataclass
class Expectations:
    xfail: dict[str, str] = field(default_factory=dict)
    skip: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path, names: list[str]) -> Expectations:
        """The rules for the first of ``names`` (checkpoint, then agent) plus ``*``."""
        path = Path(path)
        if not path.exists():
            raise ExpectError(f"--hud-expect: {path} does not exist")
        text = path.read_text()
        with parse_errors_as(ExpectError, f"--hud-expect: cannot parse {path}"):
            if path.suffix in (".yaml", ".yml"):
                data = _yaml().safe_load(text) or {}
            else:
                import tomllib

                data = tomllib.loads(text)
        if not isinstance(data, dict):
            raise ExpectError(f"--hud-expect: {path} must hold one table per agent or checkpoint")
        out = cls()
        for name in ["*", *reversed([n for n in names if n])]:
            table = data.get(name)
            if table is None:
                continue
            out.merge(table, f"{path} [{name}]")
        return out

    def merge(self, table: object, where: str) -> None:
        if not isinstance(table, dict):
            raise ExpectError(f"{where} must be a table with xfail and/or skip")
        unknown = set(table) - {"xfail", "skip"}
        if unknown:
            raise ExpectError(f"{where} has unknown keys {sorted(unknown)}; use xfail and skip")
        for kind in ("xfail", "skip"):
            rules = table.get(kind) or {}
            if isinstance(rules, list):
                rules = {g: f"expected by {where}" for g in rules}
            if not isinstance(rules, dict):
                raise ExpectError(f"{where}: {kind} must map task globs to reasons")
            getattr(self, kind).update({str(g): str(r) for g, r in rules.items()})

    def match(self, env: str, slug: str, task_id: str) -> tuple[str, str] | None:
        """``("skip"|"xfail", reason)`` for a task, skip winning over xfail."""
        names = _names(env, slug, task_id)
        for kind in ("skip", "xfail"):
            for glob, reason in getattr(self, kind).items():
                if any(fnmatch.fnmatchcase(n, glob) for n in names):
                    return kind, reason
        return None

    def unmatched(self, rows: Iterable[tuple[str, str, str]]) -> list[tuple[str, str]]:
        """``(kind, glob)`` for each rule no ``(env, slug, task_id)`` row matches."""
        names = [n for row in rows for n in _names(*row)]
        return [
            (kind, glob)
            for kind in ("xfail", "skip")
            for glob in getattr(self, kind)
            if not any(fnmatch.fnmatchcase(n, glob) for n in names)
        ]


def _names(env: str, slug: str, task_id: str) -> tuple[str, str]:
    """What a glob is matched against: ``env/slug`` and ``env/task_id``."""
    return f"{env}/{slug}", f"{env}/{task_id}"


def _yaml() -> ModuleType:
    """PyYAML, declared as the ``yaml`` extra; TOML needs nothing (tomllib)."""
    try:
        import yaml
    except ImportError:
        raise ExpectError(
            "--hud-expect: a .yaml/.yml expectations file needs PyYAML: pip install "
            "'pytest-hud[yaml]' (or pyyaml), or write the expectations as TOML"
        ) from None
    return yaml
