"""ManiSkill3's tabletop tasks with a motion-planning solution, their prompts, step limits and
rows, as pure data. Row ``k`` is ManiSkill's seeded episode ``k`` (object and goal poses).
"""

from __future__ import annotations

from pytest_hud import Task
from pytest_hud.suites.tables import prompt_reader, seed_rows, shipped_files

__all__ = [
    "ENV",
    "MAX_STEPS",
    "MODULE",
    "PROMPTS",
    "SEEDS",
    "SUITE_FILES",
    "rows",
    "task_for_prompt",
]

ENV = "maniskill"
MODULE = "pytest_hud.suites.maniskill"
#: Seeds per task in the shipped file.
SEEDS = 50

#: Every task with its instruction (ManiSkill's task descriptions, shortened).
PROMPTS: dict[str, str] = {
    "PickCube-v1": "pick up the red cube and move it to the goal position",
    "PushCube-v1": "push the cube to the goal region in front of it",
    "StackCube-v1": "stack the red cube on top of the green cube",
    "PegInsertionSide-v1": "insert the orange end of the peg into the hole in the box",
}
#: Step limits: ManiSkill's registered ``max_episode_steps`` are 50 (100 for the peg), sized
#: for RL policies; its motion-planning demonstrations run longer (PickCube's ~70-110
#: steps), so the suite doubles and more: what ManiSkill's imitation-learning baselines
#: evaluate demonstrations-trained policies with.
MAX_STEPS: dict[str, int] = {
    "PickCube-v1": 200,
    "PushCube-v1": 200,
    "StackCube-v1": 400,
    "PegInsertionSide-v1": 400,
}

#: The task a prompt names (the expert reads its row's task from the prompt).
task_for_prompt = prompt_reader(PROMPTS, "ManiSkill", MODULE, "PickCube-v1")


def rows(tasks: list[str] | None = None, seeds: int = SEEDS) -> list[Task]:
    """``tasks`` (all four by default) x seeds 0..``seeds``-1."""
    return seed_rows(
        MODULE, tasks or list(PROMPTS), seeds, dict.fromkeys(PROMPTS, ENV), suite="ManiSkill"
    )


#: The shipped JSONL file, name -> (path, rows) (suites/files.py writes it).
SUITE_FILES = shipped_files(__file__, {"tabletop": rows})
