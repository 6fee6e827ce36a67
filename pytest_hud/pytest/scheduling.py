"""An xdist scheduler that keeps ``--hud-concurrency`` items queued on every worker.

xdist's load scheduling tops a worker up to about two pending items; a worker's
rollout lookahead can only reach items it has been handed, so this variant keeps
at least ``width`` queued per worker (while items remain) and otherwise defers to
xdist's own heuristics. ``--dist loadgroup`` needs none of this: it sends a whole
group (a Shared substrate's items) to one worker at once.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScheduling

__all__ = ["HudBlockScheduling", "HudLoadScheduling"]


class HudLoadScheduling(LoadScheduling):
    def __init__(self, config: Any, log: Any = None, *, width: int = 1) -> None:
        super().__init__(config, log)
        self.width = width

    def _top_up(self, node: Any) -> None:
        pending = self.node2pending.get(node)
        if pending is None or node.shutting_down or not self.pending:
            return
        missing = self.width - len(pending)
        if missing > 0:
            self._send_tests(node, min(missing, len(self.pending)))

    def schedule(self) -> None:
        super().schedule()
        for node in list(self.node2pending):
            self._top_up(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        self._top_up(node)
        super().check_schedule(node, duration)


class HudBlockScheduling(LoadScheduling):
    """Each worker gets one contiguous block of the items, in order (used when recording).

    Concatenating the workers' dataset parts in block order then gives episodes in test
    order. Blocks trade xdist's load balancing for that order.
    """

    def schedule(self) -> None:
        assert self.collection_is_completed
        state: Any = self
        if state.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection = list(next(iter(self.node2collection.values())))
        state.collection = collection
        self.pending[:] = range(len(collection))
        nodes = list(self.nodes)
        total = len(self.pending)
        for i, node in enumerate(nodes):
            size = total // len(nodes) + (1 if i < total % len(nodes) else 0)
            if size:
                self._send_tests(node, size)
        for node in nodes:
            node.shutdown()
