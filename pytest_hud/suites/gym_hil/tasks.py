"""gym-hil's tasks, prompts and rows as pure data; row ``k`` is seed ``k`` in every run."""

from __future__ import annotations

from pytest_hud import Task
from pytest_hud.suites.tables import seed_rows, shipped_files

__all__ = ["ENV", "MODULE", "PROMPTS", "SUITE_FILES", "pick_cube"]

ENV = "gym-hil"
MODULE = "pytest_hud.suites.gym_hil"
#: gym-hil's registered id (its end-effector wrapper, 4-d actions) -> the instruction.
PROMPTS: dict[str, str] = {"PandaPickCube-v0": "pick up the cube"}


def pick_cube(seeds: int = 50) -> list[Task]:
    """PandaPickCube x seeds ``0..seeds-1`` (each seed places the cube)."""
    return seed_rows(MODULE, tuple(PROMPTS), seeds, dict.fromkeys(PROMPTS, ENV), suite="gym-hil")


#: The shipped JSONL file, name -> (path, rows) (suites/files.py writes it).
SUITE_FILES = shipped_files(__file__, {"pick_cube": pick_cube})
