"""A crashed xdist worker's item as an ERROR row (issue 12 #6).

When a worker dies mid-item (SIGKILL, the OOM killer, a segfault in a sim), xdist
reports the item FAILED with ``when="???"`` and no hud row: the table and the results
JSON had 10 rows for 11 items and the gates never saw the missing one. The controller
turns it into an infrastructure ERROR (pytest's ERROR, ``when="setup"``) whose row says
``phase: worker``, which worker and how it ended. The controller never collects, so the
row's env, slug and repeat are read back from the item id (``env/slug`` or
``env/slug[rep]``, as :class:`~pytest_hud._plugin.cases.HudCase` makes them).
"""

from __future__ import annotations

import re
from typing import Any

from pytest_hud._plugin.internals import worker_exitcode, worker_node_id
from pytest_hud._plugin.state import SessionState
from pytest_hud.process import describe_exit

__all__ = ["CrashMixin", "crash_row", "hud_param"]

_CASE_ID = re.compile(r"^(?P<env>[^/\[\]]+)/(?P<slug>[^\[\]]+?)(?:\[(?P<rep>\d+)\])?$")


def hud_param(nodeid: str) -> re.Match[str] | None:
    """The hud case id in ``nodeid``'s parameters, if it has one."""
    if not nodeid.endswith("]") or "[" not in nodeid:
        return None
    return _CASE_ID.match(nodeid[nodeid.index("[") + 1 : -1])


def crash_row(nodeid: str, worker: str, exitcode: int | None, agent: str) -> dict[str, Any]:
    """The ERROR row of a hud item whose worker died under it."""
    case = hud_param(nodeid)
    env, slug = (case["env"], case["slug"]) if case else (None, None)
    how = describe_exit(exitcode) if exitcode is not None else "died"
    error = (
        f"xdist worker {worker} {how} while running this item: expected the worker to "
        f"report the rollout, got no report; fix: see the worker's output above (the OOM "
        f"killer, a crash in the sim or model), or run the item alone without -n"
    )
    return {
        "nodeid": nodeid,
        "group": nodeid.split("[", 1)[0],
        "key": f"{env}/{slug}" if case else None,
        "env": env,
        "task_id": re.sub(r"-[0-9a-f]{8}$", "", slug) if slug else None,
        "slug": slug,
        "args": {},
        "rep": int(case["rep"] or 0) if case else 0,
        "seed": None,
        "agent": agent,
        "outcome": "error",
        "score": None,
        "success": None,
        "total_reward": None,
        "steps": None,
        "duration": 0.0,
        "prompt": "",
        "error": error,
        "error_type": "WorkerCrashed",
        "phase": "worker",
        "worker": worker,
        "exitcode": exitcode,
        "infer_s": None,
        "env_s": None,
        "video": None,
        "dataset": None,
    }


class CrashMixin(SessionState):
    """The controller's work when a worker dies under a hud item."""

    def handle_crashitem(self, nodeid: str, report: Any) -> None:
        """xdist's ``pytest_handlecrashitem``: make the item's report an ERROR with its row
        (``logreport`` then files it like any other row, for the table, JSON and gates)."""
        if hud_param(nodeid) is None:
            return
        node = getattr(report, "node", None)
        worker = worker_node_id(node) if node is not None else "?"
        row = crash_row(nodeid, worker, worker_exitcode(node), self.agent_label)
        report.hud = row
        report.when = "setup"  # infrastructure failed: pytest's ERROR, not a FAIL
        report.longrepr = row["error"]
        self.__dict__.setdefault("crashed_workers", []).append(worker)

    def reap_dead_workers(self) -> None:
        """On the controller under Docker, at unconfigure (xdist has torn its workers down
        by then): remove the containers whose owner died without removing them (a worker
        that crashed or was killed with an interrupted controller); live owners' are
        left alone. Other runtimes' children die with their worker (lifeline)."""
        if self.is_worker or not self.options.runtime.startswith("docker"):
            return
        from pytest_hud.runtime.docker.owners import reap_containers

        try:
            reap_containers()
        except Exception as exc:  # no engine reachable: nothing of ours can be running
            self.__dict__["reap_error"] = f"{type(exc).__name__}: {exc}"
