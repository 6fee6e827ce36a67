"""The terminal summary's word on model threads the session gave up on (issue 12 #8).

A rollout that times out cancels its agent, but a forward stuck in ``infer`` keeps its
(daemon) thread: :func:`pytest_hud.threads.abandoned` lists those still running. Once
the rollout loop is closed (``sessionfinish``), each becomes one summary line, so a run
that ended on time still says that a thread was left wedged, in what, and for how long.
Under xdist each worker hands its lines to the controller through ``workeroutput``.
"""

from __future__ import annotations

from typing import Any

from pytest_hud._plugin.internals import worker_id, worker_output
from pytest_hud._plugin.state import SessionState
from pytest_hud.threads import abandoned

__all__ = ["KEY", "AbandonedMixin", "abandoned_lines"]

#: The workeroutput key a worker's lines travel under.
KEY = "pytest_hud_abandoned"


def abandoned_lines(where: str = "") -> list[str]:
    """One line per model thread still running after its caller gave up."""
    return [
        f"model thread {a.thread}{where} abandoned in {a.what} after {a.seconds:.0f} s"
        for a in abandoned()
    ]


class AbandonedMixin(SessionState):
    """Collects abandoned model threads (this process's and the workers') for the summary."""

    def publish_abandoned(self) -> None:
        """On a worker, after its loop closed: send the lines to the controller."""
        if self.is_worker:
            worker_output(self.config)[KEY] = abandoned_lines(f" (on {worker_id(self.config)})")

    def node_down(self, node: Any) -> None:
        """On the controller, a worker finished: keep the lines it sent."""
        lines = worker_output(node).get(KEY) or []
        self.__dict__.setdefault("worker_abandoned", []).extend(str(x) for x in lines)

    def abandoned_summary(self, tr: Any) -> None:
        lines = [*self.__dict__.get("worker_abandoned", []), *abandoned_lines()]
        for line in lines:
            tr.write_line(line, yellow=True, bold=True)
