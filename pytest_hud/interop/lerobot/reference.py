"""LeRobot's own episodes for a checkpoint, via lerobot-eval's ``rollout`` loop: the yardstick for
tests/interop/test_lerobot_fidelity.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.interop.lerobot.envs import make_vector_env
from pytest_hud.robot import lerobot_version as compat

__all__ = ["Episode", "lerobot_episodes"]


@dataclass
class Episode:
    """One episode as lerobot-eval accounts it."""

    seed: int
    reward: float
    success: bool
    length: int
    actions: np.ndarray  # [length, action_dim], what env.step received


def _load(checkpoint: str | Path) -> tuple[Any, Any, Any]:
    """policy, preprocessor, postprocessor, as lerobot-eval makes them (on the CPU)."""
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    path = str(checkpoint)
    config = PreTrainedConfig.from_pretrained(path)
    config.pretrained_path = path
    config.device = "cpu"
    policy = get_policy_class(config.type).from_pretrained(path, config=config)
    policy.eval()
    pre, post = make_pre_post_processors(
        policy_cfg=config,
        pretrained_path=path,
        preprocessor_overrides={"device_processor": {"device": "cpu"}},
    )
    return policy, pre, post


def lerobot_episodes(
    checkpoint: str | Path, env_type: str, seeds: Sequence[int], width: int = 1, **config: Any
) -> list[Episode]:
    """lerobot-eval's episodes of ``checkpoint`` on LeRobot's ``env_type`` env (its config
    fields ``config``), ``width`` envs per batch, one episode per seed."""
    from lerobot.envs.factory import make_env_pre_post_processors
    from lerobot.scripts.lerobot_eval import rollout

    if not seeds or len(seeds) % width:
        raise ValueError(f"seeds fill whole batches of width {width}; got {len(seeds)} seeds")
    policy, pre, post = _load(checkpoint)
    env_config, vec = make_vector_env(env_type, width, **config)
    env_pre, env_post = make_env_pre_post_processors(env_config, policy.config)
    episodes: list[Episode] = []
    try:
        # the plugin's sim resets once (seed 0) to derive its contract before any episode;
        # so does this env, so both have the same history (MetaWorld renders its first
        # frame after start-up a few pixels apart from every later one, same physics)
        vec.reset(seed=0, options=compat.new_rollout_options() or None)
        for start in range(0, len(seeds), width):
            batch = [int(s) for s in seeds[start : start + width]]
            data = rollout(vec, policy, env_pre, env_post, pre, post, seeds=batch)
            done = data["done"].numpy()
            for i, seed in enumerate(batch):
                length = int(np.argmax(done[i])) + 1 if done[i].any() else done.shape[1]
                episodes.append(
                    Episode(
                        seed=int(seed),
                        reward=float(data["reward"][i, :length].sum()),
                        success=bool(data["success"][i, :length].any()),
                        length=length,
                        actions=data["action"][i, :length].numpy(),
                    )
                )
    finally:
        vec.close()
    return episodes
