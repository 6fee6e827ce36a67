"""ManiSkill3's tabletop tasks with a motion-planning solution, their prompts, step limits and
rows, as pure data. Row ``k`` is ManiSkill's seeded episode ``k`` (object and goal poses).
"""

from __future__ import annotations

from pathlib import Path

from pytest_hud import Task

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

_BY_PROMPT = {prompt: name for name, prompt in PROMPTS.items()}


def task_for_prompt(prompt: str) -> str:
    """The task a prompt names: one of :data:`PROMPTS`' values, or a task id itself."""
    text = prompt.strip()
    if text in PROMPTS:
        return text
    try:
        return _BY_PROMPT[text]
    except KeyError:
        raise LookupError(
            f"prompt {prompt!r} names no ManiSkill task: expected one of the suite's prompts "
            "(pytest_hud.suites.maniskill.PROMPTS) or a task id such as 'PickCube-v1'"
        ) from None


def rows(tasks: list[str] | None = None, seeds: int = SEEDS) -> list[Task]:
    """``tasks`` (all four by default) x seeds 0..``seeds``-1."""
    names = list(tasks or PROMPTS)
    unknown = [n for n in names if n not in PROMPTS]
    if unknown:
        raise ValueError(f"unknown ManiSkill task(s) {unknown}; known: {', '.join(PROMPTS)}")
    if seeds < 1:
        raise ValueError(f"seeds: expected at least 1, got {seeds}")
    return [
        Task(ENV, name, {"seed": k}, metadata={"module": MODULE})
        for name in names
        for k in range(seeds)
    ]


#: The shipped JSONL file, name -> (path, rows): a package, so ``pytest --pyargs`` names it
#: (suites/files.py writes it).
SUITE_FILES = {"tabletop": (Path(__file__).parent / "tabletop" / "tasks.jsonl", lambda: rows())}
