"""Kinetix's hand-made levels, their prompts and rows, as pure data (no JAX import). A row is one
level and one seed; ``.s``, ``.m`` and ``.l`` ship every level of that size once (seed 0).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from pytest_hud import Task
from pytest_hud.suites.files import Row

__all__ = [
    "ENV",
    "LEVELS",
    "MODULE",
    "PROMPTS",
    "SIZES",
    "SUITE_FILES",
    "level_file",
    "level_for_prompt",
    "rows",
]

ENV = "kinetix"
MODULE = "pytest_hud.suites.kinetix"
_HERE = Path(__file__).parent

#: size -> the hand-made levels kinetix-env 3.0.2 ships (``kinetix/levels/<size>/*.json``):
#: small (5 polygons, 2 circles, 1 joint, 1 thruster), medium and large scenes.
SIZES: dict[str, tuple[str, ...]] = {
    "s": (
        "h0_weak_thrust",
        "h1_thrust_over_ball",
        "h2_one_wheel_car",
        "h3_point_the_thruster",
        "h4_thrust_aim",
        "h5_rotate_fall",
        "h6_unicycle_right",
        "h7_unicycle_left",
        "h8_unicycle_balance",
        "h9_explode_then_thrust_over",
    ),
    "m": (
        "arm_hard",
        "arm_left",
        "arm_right",
        "arm_up",
        "h0_unicycle",
        "h10_thrust_right_easy",
        "h11_thrust_left_easy",
        "h12_thrustfall_left",
        "h13_thrustfall_right",
        "h14_thrustblock",
        "h15_thrustshoot",
        "h16_thrustcontrol_right",
        "h17_thrustcontrol_left",
        "h18_thrust_right_very_easy",
        "h19_thrust_left_very_easy",
        "h1_car_left",
        "h2_car_right",
        "h3_car_thrust",
        "h4_thrust_the_needle",
        "h5_angry_birds",
        "h6_thrust_over",
        "h7_car_flip",
        "h8_weird_vehicle",
        "h9_spin_the_right_way",
    ),
    "l": (
        "car_launch",
        "car_swing_around",
        "chain_lander",
        "chain_thrust",
        "gears",
        "grasp_easy",
        "grasp_hard",
        "h0_angrybirds",
        "h10_morph_direction_2",
        "h11_obstacle_avoidance",
        "h12_platformer_1",
        "h13_platformer_2",
        "h14_simple_thruster",
        "h15_swing_up",
        "h16_thruster_goal",
        "h17_unicycle",
        "h1_car_left",
        "h2_car_ramp",
        "h3_car_right",
        "h4_cartpole",
        "h5_flappy_bird",
        "h6_lorry",
        "h7_maze_1",
        "h8_maze_2",
        "h9_morph_direction",
        "hard_beam_balance",
        "hard_cartpole_thrust",
        "hard_cartpole_wheels",
        "hard_lunar_lander",
        "hard_pinball",
        "lever_puzzle",
        "mjc_half_cheetah",
        "mjc_half_cheetah_easy",
        "mjc_hopper",
        "mjc_hopper_easy",
        "mjc_swimmer",
        "mjc_walker",
        "mjc_walker_easy",
        "pr",
        "rail",
    ),
}
#: Every level's task id: ``<size>_<name>`` (``s_h0_weak_thrust``), in the shipped order.
LEVELS: tuple[str, ...] = tuple(f"{size}_{name}" for size, names in SIZES.items() for name in names)
#: Kinetix has no language: every level has one goal (the green shape touches a blue one,
#: never a red one); the prompt names the level, so a level-aware agent can read it.
PROMPTS: dict[str, str] = {
    level: f"Kinetix level {level[0]}/{level[2:]}: make the green shape touch the blue shape "
    "without touching red"
    for level in LEVELS
}
_PROMPT_LEVEL = re.compile(r"^Kinetix level ([sml])/(\S+):")


def level_file(level: str) -> str:
    """The path Kinetix's loader resolves for a task id (``"s/h0_weak_thrust.json"``)."""
    if level not in PROMPTS:
        raise LookupError(
            f"unknown Kinetix level {level!r}: expected <size>_<name> of a shipped level, "
            f"such as 's_h0_weak_thrust' ({len(LEVELS)} levels: pytest_hud.suites.kinetix.LEVELS)"
        )
    return f"{level[0]}/{level[2:]}.json"


def level_for_prompt(prompt: str) -> str:
    """The task id a prompt names (one of :data:`PROMPTS`' values, or a task id itself)."""
    text = prompt.strip()
    if text in PROMPTS:
        return text
    match = _PROMPT_LEVEL.match(text)
    level = f"{match.group(1)}_{match.group(2)}" if match else ""
    if level not in PROMPTS:
        raise LookupError(
            f"prompt {prompt!r} names no Kinetix level: expected one of the suite's prompts "
            "(pytest_hud.suites.kinetix.PROMPTS) or a task id such as 's_h0_weak_thrust'"
        )
    return level


def rows(size: str | None = None, seeds: int = 1) -> list[Task]:
    """The levels of ``size`` (``"s"``, ``"m"``, ``"l"``; all three by default) x ``seeds``
    seeds each (the episode's ``PRNGKey``; the shipped levels' physics do not draw from it,
    so a deterministic policy repeats its outcome)."""
    if size is not None and size not in SIZES:
        raise ValueError(f"unknown Kinetix size {size!r}; known: {', '.join(SIZES)}")
    if seeds < 1:
        raise ValueError(f"seeds: expected at least 1, got {seeds}")
    levels = [lv for lv in LEVELS if size is None or lv[0] == size]
    return [
        Task(ENV, level, {"seed": k}, metadata={"module": MODULE})
        for level in levels
        for k in range(seeds)
    ]


def _rtc_rows() -> list[dict[str, object]]:
    from pytest_hud.suites.kinetix import vla_eval  # vla-eval's benchmark class: imported here

    return vla_eval.rows()


#: The shipped JSONL files, name -> (path, rows): one package per size, so ``pytest --pyargs``
#: names them, and ``.rtc``'s rows of vla-eval's Kinetix benchmark (suites/files.py writes them).
SUITE_FILES: dict[str, tuple[Path, Callable[[], Sequence[Row]]]] = {
    size: (_HERE / size / "tasks.jsonl", partial(rows, size)) for size in SIZES
}
SUITE_FILES["rtc"] = (_HERE / "rtc" / "tasks.jsonl", _rtc_rows)
