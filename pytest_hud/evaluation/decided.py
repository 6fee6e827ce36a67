"""Tasks a sequential test decided before all their items ran: the items left are skipped with
the task's reason (before their rollout, or dropped by the xdist controller before they are sent)
and counted as saved. One piece for ``--hud-gate=sequential`` (one agent) and the A/B feature's
paired stopping, which differ only in how an item names its task.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

__all__ = ["DecidedTasks"]


class DecidedTasks:
    """The decided tasks' skip reasons and the items each did not run. ``task_of`` names an
    item's task from its node id (None: an item no sequential test judges)."""

    def __init__(self, task_of: Callable[[str], str | None]) -> None:
        self.task_of = task_of
        self.reasons: dict[str, str] = {}  # task -> the skip reason of its remaining items
        self.skipped: dict[str, list[str]] = defaultdict(list)  # task -> items not run

    def decide(self, task: str, reason: str) -> None:
        """``task`` is decided: its items not yet run are skipped with ``reason``."""
        self.reasons[task] = reason

    def reason(self, task: str | None) -> str | None:
        """The skip reason of ``task``'s items; None while it is undecided."""
        return None if task is None else self.reasons.get(task)

    def item_reason(self, nodeid: str) -> str | None:
        """The skip reason of the item ``nodeid``; None while its task is undecided."""
        return self.reason(self.task_of(nodeid))

    def skipped_at_setup(self, nodeid: str, why: str) -> None:
        """Count an item skipped at setup as saved when ``why`` carries its decided task's
        reason (skipped where it ran, or dropped by the xdist controller)."""
        task = self.task_of(nodeid)
        reason = self.reason(task)
        if task is not None and reason is not None and reason in why:
            self.skipped[task].append(nodeid)

    def saved(self, task: str | None = None) -> int:
        """The items not run: ``task``'s, or every task's."""
        if task is not None:
            return len(self.skipped.get(task, []))
        return sum(len(v) for v in self.skipped.values())
