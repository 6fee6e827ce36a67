"""A crashed xdist worker's item becomes an infrastructure ERROR row (``phase: worker``) instead
of a FAILED report with no row.
"""

from __future__ import annotations

import re

import pytest

from pytest_hud._plugin.feature_api import Hud, worker_exitcode, worker_node_id
from pytest_hud.evaluation.results import Row
from pytest_hud.plumbing.process import describe_exit
from pytest_hud.runtime.task import without_args_hash

__all__ = ["CrashPlugin", "Settings", "crash_row", "enable", "hud_param"]

Settings = None

#: ``env/slug``, ``env/id[k:v]...[+hash]`` (a readable id) or either with a repeat's ``[N]``
_CASE_ID = re.compile(
    r"^(?P<env>[^/\[\]]+)/(?P<slug>[^\[\]]+?(?:\[(?:\+[0-9a-f]{8}|[^\[\]]*:[^\[\]]*)\])*)"
    r"(?:\[(?P<rep>\d+)\])?$"
)


def hud_param(nodeid: str) -> re.Match[str] | None:
    """The hud case id in ``nodeid``'s parameters, if it has one."""
    if not nodeid.endswith("]") or "[" not in nodeid:
        return None
    return _CASE_ID.match(nodeid[nodeid.index("[") + 1 : -1])


def crash_row(nodeid: str, worker: str, exitcode: int | None, agent: str) -> Row:
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
        "task_id": without_args_hash(slug.split("[")[0]) if slug else None,
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


class CrashPlugin:
    """The controller's work when a worker dies under a hud item (registered on the
    controller of an xdist run)."""

    def __init__(self, agent_label: str) -> None:
        self.agent_label = agent_label
        self.crashed_workers: list[str] = []

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport) -> None:
        """Make the item's report an ERROR with its row (the session's ``logreport`` then
        files it like any other row, for the table, JSON and gates)."""
        if hud_param(crashitem) is None:
            return
        node = getattr(report, "node", None)
        worker = worker_node_id(node) if node is not None else "?"
        row = crash_row(crashitem, worker, worker_exitcode(node), self.agent_label)
        report.hud = row  # type: ignore[attr-defined]
        report.when = "setup"  # infrastructure failed: pytest's ERROR, not a FAIL
        report.longrepr = row["error"]
        self.crashed_workers.append(worker)


def enable(settings: None, hud: Hud) -> CrashPlugin | None:
    """The feature's plugin for this session (on the controller of an xdist run), else None."""
    if hud.is_worker or not hud.distributed:
        return None
    return CrashPlugin(hud.agent_label)
