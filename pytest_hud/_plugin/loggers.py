"""Logging's logger registry, safe to walk while the plugin's threads import modules.

At every test phase pytest's log capture walks ``logging.Logger.manager.loggerDict``
without logging's lock. A logger created meanwhile on another thread (a module that the
dataset writer, or a policy on the rollout loop ahead of its item, imports on first use)
makes that walk raise ``RuntimeError: dictionary changed size during iteration`` in the
main thread: an ERROR at setup that no test caused. While the plugin is configured the
registry hands out views of a copy taken in one step, so a walk never sees it change.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values

__all__ = ["SnapshotRegistry", "install", "uninstall"]

_Entry = logging.Logger | logging.PlaceHolder


class SnapshotRegistry(dict[str, _Entry]):
    """``loggerDict`` whose views are views of a copy: ``dict.copy`` runs in C, holding the
    GIL, so no thread inserts halfway through it. (``__iter__`` stays the dict's own: the
    copy itself goes through it.) ``holders`` counts the sessions holding it: evaluate()
    inside a test configures a session of its own."""

    holders = 0

    def keys(self) -> dict_keys[str, _Entry]:
        return dict.copy(self).keys()

    def values(self) -> dict_values[str, _Entry]:
        return dict.copy(self).values()

    def items(self) -> dict_items[str, _Entry]:
        return dict.copy(self).items()


def _lock() -> AbstractContextManager[object]:
    return logging._lock  # type: ignore[attr-defined]  # the lock getLogger takes


def install(manager: logging.Manager = logging.Logger.manager) -> None:
    """Swap the registry for a :class:`SnapshotRegistry` holding the same loggers."""
    with _lock():
        registry = manager.loggerDict
        if not isinstance(registry, SnapshotRegistry):
            registry = manager.loggerDict = SnapshotRegistry(dict.copy(registry))
        registry.holders += 1


def uninstall(manager: logging.Manager = logging.Logger.manager) -> None:
    """Once the last session holding it lets go, put back a plain dict, with every logger
    created meanwhile."""
    with _lock():
        registry = manager.loggerDict
        if isinstance(registry, SnapshotRegistry):
            registry.holders -= 1
            if registry.holders <= 0:
                manager.loggerDict = dict.copy(registry)
