"""A lerobot checkpoint written the way lerobot-train's ``save_checkpoint`` writes it, one
file at a time, so tests can stop at any stage (the watcher must never evaluate one)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from paths import EXAMPLES

#: the committed checkpoint (lerobot-train's own output: examples/train_eval/policy)
SHIPPED = EXAMPLES / "train_eval" / "policy" / "metaworld_act"
#: save_checkpoint's order: the policy (config, weights), the train config, each
#: processor's state file before its JSON; then training_state/, then checkpoints/last
LEROBOT_ORDER = [
    "config.json",
    "model.safetensors",
    "train_config.json",
    "policy_preprocessor_step_3_normalizer_processor.safetensors",
    "policy_preprocessor.json",
    "policy_postprocessor_step_0_unnormalizer_processor.safetensors",
    "policy_postprocessor.json",
]


def link_last(run: Path, step: int) -> None:
    """Point ``run/checkpoints/last`` at ``step`` (lerobot's update_last_checkpoint)."""
    link = run / "checkpoints" / "last"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(f"{step:06d}")


def save_stages(run: Path, step: int, steps: int | None = None) -> Iterator[Path]:
    """Write the shipped checkpoint as ``run``'s step ``step``, yielding its folder after
    each write (the weights file once half written too); ``steps`` rewrites
    train_config.json's ``steps`` (the run's final step). ``last`` is left to the caller."""
    folder = run / "checkpoints" / f"{step:06d}" / "pretrained_model"
    folder.mkdir(parents=True)
    for name in LEROBOT_ORDER:
        data = (SHIPPED / name).read_bytes()
        if name == "model.safetensors":
            (folder / name).write_bytes(data[: len(data) // 2])
            yield folder
        if name == "train_config.json" and steps is not None:
            data = json.dumps({**json.loads(data), "steps": steps}).encode()
        (folder / name).write_bytes(data)
        yield folder
    state = folder.parent / "training_state"
    state.mkdir()
    (state / "training_step.json").write_text(json.dumps({"step": step}))
    yield folder


def save(run: Path, step: int, steps: int | None = None) -> Path:
    """The whole checkpoint, then ``last`` pointed at it."""
    *_, folder = save_stages(run, step, steps)
    link_last(run, step)
    return folder
