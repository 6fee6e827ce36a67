"""Does the plugin act exactly as lerobot would with a checkpoint? One MetaWorld episode
through the plugin's lerobot agent, recorded with the plugin's DatasetWriter; then lerobot's
own inference replayed on the recorded frames (read back with ``LeRobotDataset``, in the
layout lerobot-train fed the policy): the checkpoint's preprocessor, ``select_action``
once per frame (its own chunk queue), the postprocessor. The recorded actions are what the
plugin sent on the wire. Usage: ``python fidelity.py CHECKPOINT [TASK] [SEED]``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from pytest_hud import LocalRuntime, Task, run
from pytest_hud.robot import load_agent
from pytest_hud.robot.record.writer import DatasetWriter

HERE = Path(__file__).resolve().parent
INPUTS = ("observation.state", "observation.environment_state")


def compare(
    checkpoint: str | Path, task: str = "button-press-topdown-v3", seed: int = 100
) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(plugin actions [T, 4], lerobot actions [T, 4], success)`` for one episode."""
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from pytest_hud.robot.agent.lerobot import load_policy

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "episode"
        writer = DatasetWriter(root)
        agent = load_agent(f"lerobot:{checkpoint}")
        agent.observers.append(writer.observer)
        row = Task("metaworld", task, {"seed": seed})
        sketch = os.environ.get("MW_SKETCH")
        os.environ["MW_SKETCH"] = "0"  # record the states the policy reads, no animation
        try:
            [result] = asyncio.run(run([row], agent, LocalRuntime(HERE / "metaworld_env.py")))
        finally:
            os.environ.pop("MW_SKETCH") if sketch is None else os.environ.update(MW_SKETCH=sketch)
        if result.error is not None:
            raise RuntimeError(f"the episode errored: {result.error}")
        writer.finalize()
        frames = LeRobotDataset("local/fidelity", root=root)
        policy, pre, post = load_policy(checkpoint)  # a fresh copy: select_action keeps state
        policy.reset()
        ours, theirs = [], []
        with torch.inference_mode():
            for i in range(len(frames)):
                frame = frames[i]
                batch = {k: frame[k][None] for k in INPUTS} | {"task": [frame["task"]]}
                theirs.append(post(policy.select_action(pre(batch)))[0].numpy())
                ours.append(frame["action"].numpy())
    return np.stack(ours), np.stack(theirs), bool(result.success)


if __name__ == "__main__":
    task = sys.argv[2] if len(sys.argv) > 2 else "button-press-topdown-v3"
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    ours, theirs, success = compare(sys.argv[1], task, seed)
    print(f"{len(ours)} ticks, success={success}, max |plugin - lerobot| = "
          f"{np.abs(ours - theirs).max():.3g}")  # fmt: skip
