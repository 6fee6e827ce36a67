"""robosuite's tasks as rows: prompts, robots, objects, step limits; row ``k`` is seed ``k`` in
every run. Pure data (robosuite is imported by the sim only).
"""

from __future__ import annotations

from functools import partial

from pytest_hud import Task
from pytest_hud.suites.tables import prompt_reader, seed_rows, shipped_files

__all__ = [
    "ENVS",
    "MAX_STEPS",
    "MODULE",
    "OBJECTS",
    "PROMPTS",
    "ROBOTS",
    "SUITE_FILES",
    "rows",
    "task_for_prompt",
]

MODULE = "pytest_hud.suites.robosuite"
#: robosuite environment -> the instruction a language-conditioned policy gets (our wording).
PROMPTS: dict[str, str] = {
    "Lift": "lift the cube",
    "Stack": "stack the red cube on the green cube",
    "Door": "open the door",
    "TwoArmLift": "lift the pot with both arms",
}
#: The robots each task is made with (robosuite's ``robots=``): Panda arms.
ROBOTS: dict[str, tuple[str, ...]] = {
    "Lift": ("Panda",),
    "Stack": ("Panda",),
    "Door": ("Panda",),
    "TwoArmLift": ("Panda", "Panda"),
}
#: The object observables, in order, that make a task's ``observation/environment_state``
#: (robosuite's ``object`` modality), with their sizes.
OBJECTS: dict[str, tuple[tuple[str, int], ...]] = {
    "Lift": (("cube_pos", 3), ("cube_quat", 4), ("gripper_to_cube_pos", 3)),
    "Stack": (
        ("cubeA_pos", 3),
        ("cubeA_quat", 4),
        ("cubeB_pos", 3),
        ("cubeB_quat", 4),
        ("cubeA_to_cubeB", 3),
        ("gripper_to_cubeA", 3),
        ("gripper_to_cubeB", 3),
    ),
    "Door": (
        ("door_pos", 3),
        ("handle_pos", 3),
        ("hinge_qpos", 1),
        ("door_to_eef_pos", 3),
        ("handle_to_eef_pos", 3),
        ("handle_qpos", 1),
    ),
    "TwoArmLift": (
        ("pot_pos", 3),
        ("pot_quat", 4),
        ("handle0_xpos", 3),
        ("handle1_xpos", 3),
        ("gripper0_to_handle0", 3),
        ("gripper1_to_handle1", 3),
    ),
}
#: Steps before an episode is cut (20 Hz: 25 s); it ends earlier at success.
MAX_STEPS: dict[str, int] = dict.fromkeys(PROMPTS, 500)
#: Task -> its env (the rows' ``env`` column): one per observation layout.
ENVS: dict[str, str] = {
    "Lift": "robosuite-lift",
    "Stack": "robosuite-stack",
    "Door": "robosuite-door",
    "TwoArmLift": "robosuite-two-arm-lift",
}
#: The task a prompt names (the expert reads its row's task from the prompt).
task_for_prompt = prompt_reader(PROMPTS, "robosuite", MODULE, "Lift")


def rows(task: str, seeds: int = 50) -> list[Task]:
    """One robosuite task x seeds ``0..seeds-1`` (each seed places the objects)."""
    return seed_rows(MODULE, [task], seeds, ENVS, suite="robosuite")


#: The shipped JSONL files, name -> (path, rows) (suites/files.py writes them).
SUITE_FILES = shipped_files(
    __file__,
    {
        "lift": partial(rows, "Lift"),
        "stack": partial(rows, "Stack"),
        "door": partial(rows, "Door"),
        "two_arm_lift": partial(rows, "TwoArmLift"),
    },
)
