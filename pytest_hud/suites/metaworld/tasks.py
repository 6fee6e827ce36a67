"""MetaWorld v3's tasks, prompts and MT1/MT10/MT50 rows as pure data; row ``k`` is train goal
``k`` in every run, and rows carry their ``module`` column.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_hud import Task
from pytest_hud.suites.tables import prompt_reader, shipped_files

__all__ = [
    "ENV",
    "MODULE",
    "MT10",
    "MT50",
    "PROMPTS",
    "SUITE_FILES",
    "VARIATIONS",
    "mt1",
    "mt10",
    "mt50",
    "task_for_prompt",
]

ENV = "metaworld"
MODULE = "pytest_hud.suites.metaworld"
#: Train goals per task (metaworld's ``_N_GOALS``).
VARIATIONS = 50

#: Every v3 task with the instruction a language-conditioned policy gets (our wording).
PROMPTS: dict[str, str] = {
    "assembly-v3": "put the ring onto the peg",
    "basketball-v3": "dunk the ball into the basket",
    "bin-picking-v3": "move the block from one bin to the other",
    "box-close-v3": "put the lid on the box",
    "button-press-topdown-v3": "press the button from the top",
    "button-press-topdown-wall-v3": "press the button from the top, past the wall",
    "button-press-v3": "press the button",
    "button-press-wall-v3": "press the button, past the wall",
    "coffee-button-v3": "press the coffee machine's button",
    "coffee-pull-v3": "pull the mug away from the coffee machine",
    "coffee-push-v3": "push the mug under the coffee machine",
    "dial-turn-v3": "turn the dial",
    "disassemble-v3": "take the ring off the peg",
    "door-close-v3": "close the door",
    "door-lock-v3": "lock the door by turning the lock",
    "door-open-v3": "open the door",
    "door-unlock-v3": "unlock the door by turning the lock",
    "hand-insert-v3": "put the block into the hole",
    "drawer-close-v3": "close the drawer",
    "drawer-open-v3": "open the drawer",
    "faucet-open-v3": "turn the faucet on",
    "faucet-close-v3": "turn the faucet off",
    "hammer-v3": "hammer the nail into the wall",
    "handle-press-side-v3": "press the handle down from the side",
    "handle-press-v3": "press the handle down",
    "handle-pull-side-v3": "pull the handle up from the side",
    "handle-pull-v3": "pull the handle up",
    "lever-pull-v3": "pull the lever up",
    "pick-place-wall-v3": "pick up the puck and place it at the goal, past the wall",
    "pick-out-of-hole-v3": "pick the peg out of the hole",
    "pick-place-v3": "pick up the puck and place it at the goal",
    "plate-slide-v3": "slide the plate into the cabinet",
    "plate-slide-side-v3": "slide the plate into the cabinet from the side",
    "plate-slide-back-v3": "slide the plate out of the cabinet",
    "plate-slide-back-side-v3": "slide the plate out of the cabinet from the side",
    "peg-insert-side-v3": "insert the peg into the hole from the side",
    "peg-unplug-side-v3": "unplug the peg from the side",
    "soccer-v3": "kick the ball into the goal",
    "stick-push-v3": "grab the stick and push the box with it",
    "stick-pull-v3": "grab the stick and pull the box with it",
    "push-v3": "push the puck to the goal",
    "push-wall-v3": "push the puck to the goal, past the wall",
    "push-back-v3": "pull the puck back to the goal",
    "reach-v3": "reach the goal",
    "reach-wall-v3": "reach the goal, past the wall",
    "shelf-place-v3": "place the puck onto the shelf",
    "sweep-into-v3": "sweep the puck into the hole",
    "sweep-v3": "sweep the puck off the table",
    "window-open-v3": "slide the window open",
    "window-close-v3": "slide the window closed",
}

#: MT50 is every task, in metaworld's order; MT10 its ten-task subset.
MT50: tuple[str, ...] = tuple(PROMPTS)
MT10: tuple[str, ...] = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
)

#: The task a prompt names (the expert reads its row's task from the prompt).
task_for_prompt = prompt_reader(PROMPTS, "MetaWorld", MODULE, "reach-v3")


def _rows(names: tuple[str, ...] | list[str], variations: int) -> list[Task]:
    if not 1 <= variations <= VARIATIONS:
        raise ValueError(f"variations: expected 1..{VARIATIONS}, got {variations}")
    unknown = [n for n in names if n not in PROMPTS]
    if unknown:
        raise ValueError(f"unknown MetaWorld task(s) {unknown}; known: {', '.join(MT50)}")
    return [
        Task(ENV, name, {"variation": k, "seed": k}, metadata={"module": MODULE})
        for name in names
        for k in range(variations)
    ]


def mt1(task: str = "reach-v3", variations: int = VARIATIONS) -> list[Task]:
    """MT1: one task over its first ``variations`` train goals (all 50 by default)."""
    return _rows([task], variations)


def mt10(variations: int = 5) -> list[Task]:
    """MT10: the ten MT10 tasks x ``variations`` train goals each."""
    return _rows(MT10, variations)


def mt50(variations: int = 2) -> list[Task]:
    """MT50: all fifty tasks x ``variations`` train goals each."""
    return _rows(MT50, variations)


#: The shipped JSONL files, name -> (path, rows) (suites/files.py writes them).
_MADE_BY: dict[str, Callable[[], list[Task]]] = {"mt1": mt1, "mt10": mt10, "mt50": mt50}
SUITE_FILES = shipped_files(__file__, _MADE_BY)
