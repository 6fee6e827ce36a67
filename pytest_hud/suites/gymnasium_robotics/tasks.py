"""gymnasium-robotics' Fetch and FrankaKitchen tasks, prompts and rows as pure data; row ``k`` is
seed ``k`` in every run.
"""

from __future__ import annotations

from pytest_hud import Task
from pytest_hud.suites.tables import prompt_reader, seed_rows, shipped_files

__all__ = [
    "ENVS",
    "FETCH",
    "KITCHEN",
    "KITCHEN_GOALS",
    "MODULE",
    "PROMPTS",
    "SUITE_FILES",
    "fetch",
    "kitchen",
    "task_for_prompt",
]

MODULE = "pytest_hud.suites.gymnasium_robotics"

FETCH: dict[str, str] = {
    "FetchReach-v4": "move the gripper to the target",
    "FetchPush-v4": "push the block to the target",
    "FetchPickAndPlace-v4": "pick up the block and put it at the target",
}
#: Row id -> the kitchen's ``tasks_to_complete``: the four-task goal of the Relay Policy
#: Learning paper (D4RL's kitchen-complete), then each of the seven tasks alone.
KITCHEN_GOALS: dict[str, tuple[str, ...]] = {
    "FrankaKitchen-v1": ("microwave", "kettle", "light switch", "slide cabinet"),
    "kitchen-microwave": ("microwave",),
    "kitchen-kettle": ("kettle",),
    "kitchen-light-switch": ("light switch",),
    "kitchen-slide-cabinet": ("slide cabinet",),
    "kitchen-hinge-cabinet": ("hinge cabinet",),
    "kitchen-bottom-burner": ("bottom burner",),
    "kitchen-top-burner": ("top burner",),
}
_KITCHEN_WORDS = {
    "microwave": "open the microwave",
    "kettle": "move the kettle to the top left burner",
    "light switch": "turn on the light",
    "slide cabinet": "slide the cabinet door open",
    "hinge cabinet": "open the hinged cabinet door",
    "bottom burner": "turn the bottom left burner knob",
    "top burner": "turn the top left burner knob",
}
KITCHEN: dict[str, str] = {
    task: ", then ".join(_KITCHEN_WORDS[g] for g in goals) for task, goals in KITCHEN_GOALS.items()
}
#: Every row id with the instruction a language-conditioned policy gets (our wording).
PROMPTS: dict[str, str] = {**FETCH, **KITCHEN}
#: Task -> the env (the rows' ``env`` column) serving it: one per observation layout.
ENVS: dict[str, str] = {
    "FetchReach-v4": "fetch-reach",
    "FetchPush-v4": "fetch-push",
    "FetchPickAndPlace-v4": "fetch-pick-and-place",
    **dict.fromkeys(KITCHEN, "franka-kitchen"),
}
#: The task a prompt names (an expert reads its row's task from the prompt).
task_for_prompt = prompt_reader(PROMPTS, "gymnasium-robotics", MODULE, "FetchPush-v4")


def fetch(seeds: int = 50, tasks: tuple[str, ...] = tuple(FETCH)) -> list[Task]:
    """The Fetch tasks (Reach, Push, PickAndPlace) x seeds ``0..seeds-1``."""
    return seed_rows(MODULE, tasks, seeds, {t: ENVS[t] for t in FETCH}, suite="Fetch")


def kitchen(seeds: int = 10, tasks: tuple[str, ...] = tuple(KITCHEN)) -> list[Task]:
    """The FrankaKitchen goals (the four-task goal and each task alone) x seeds."""
    return seed_rows(MODULE, tasks, seeds, {t: ENVS[t] for t in KITCHEN}, suite="FrankaKitchen")


#: The shipped JSONL files, name -> (path, rows) (suites/files.py writes them).
SUITE_FILES = shipped_files(__file__, {"fetch": fetch, "kitchen": kitchen})
