"""What the suites' task tables share, as pure data (no simulator imported): the task a prompt
names (an expert reads its row's task from the prompt), rows over tasks x seeds, and a suite's
table of shipped ``tasks.jsonl`` files (:mod:`.files` writes them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from pytest_hud import Task

__all__ = ["prompt_reader", "seed_rows", "shipped_files"]

R = TypeVar("R")


def prompt_reader(
    prompts: Mapping[str, str], name: str, module: str, example: str
) -> Callable[[str], str]:
    """The suite ``name``'s ``task_for_prompt``: the task whose prompt (one of ``prompts``'
    values) or whose own id a prompt is; LookupError naming where the prompts are (``module``'s
    ``PROMPTS``) and an ``example`` id otherwise."""
    by_prompt = {prompt: task for task, prompt in prompts.items()}

    def task_for_prompt(prompt: str) -> str:
        """The task a prompt names: one of the suite's prompts, or a task id itself."""
        text = prompt.strip()
        if text in prompts:
            return text
        try:
            return by_prompt[text]
        except KeyError:
            raise LookupError(
                f"prompt {prompt!r} names no {name} task: expected one of the suite's prompts "
                f"({module}.PROMPTS) or a task id such as {example!r}"
            ) from None

    return task_for_prompt


def seed_rows(
    module: str,
    tasks: Sequence[str],
    seeds: int,
    env_of: Mapping[str, str],
    *,
    suite: str = "",
) -> list[Task]:
    """``tasks`` x seeds ``0..seeds-1``, each row in its task's env (``env_of``) and carrying
    its ``module`` column; ValueError naming the ``suite``'s known tasks for an unknown one."""
    if seeds < 1:
        raise ValueError(f"seeds: expected at least 1, got {seeds}")
    unknown = [t for t in tasks if t not in env_of]
    if unknown:
        what = f"{suite} task(s)" if suite else "task(s)"
        raise ValueError(f"unknown {what} {unknown} in {module}; known: {', '.join(env_of)}")
    return [
        Task(env_of[t], t, {"seed": s}, metadata={"module": module})
        for t in tasks
        for s in range(seeds)
    ]


def shipped_files(
    where: str, rows: Mapping[str, Callable[[], R]]
) -> dict[str, tuple[Path, Callable[[], R]]]:
    """A suite's ``SUITE_FILES``: each name's ``tasks.jsonl`` in the row package of that name
    beside the module ``where`` (its ``__file__``), with the function giving its rows. One
    package a file, so ``pytest --pyargs`` names it."""
    here = Path(where).parent
    return {name: (here / name / "tasks.jsonl", make) for name, make in rows.items()}
