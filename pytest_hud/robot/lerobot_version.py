"""The one LeRobot version seam: every behaviour that differs between supported LeRobot releases
is decided here, keyed on the installed version (never on attribute probing), and every private
attribute pytest-hud touches is accessed or named here, with why.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from pytest_hud.errors import HudError

if TYPE_CHECKING:
    import torch
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.policies.pretrained import PreTrainedPolicy

    #: what LeRobot's ``make_env`` builds for a task: a synchronous or asynchronous vector env
    VectorEnv: TypeAlias = SyncVectorEnv | AsyncVectorEnv

__all__ = [
    "SUPPORTED",
    "LeRobotVersionError",
    "cap_episodes",
    "episode_limit",
    "finalize_is_final",
    "lerobot_version",
    "metaworld_resets_are_seeded",
    "new_rollout_options",
    "no_env_eval_flag",
    "open_for_append",
    "predict_from_history",
    "prepare_save",
    "require_gym_aloha",
    "require_supported",
]

#: The LeRobot releases pytest-hud is tested with (the ``lerobot`` extra admits these).
SUPPORTED = ">=0.4.4,<0.7"
_LOWEST, _BEYOND = (0, 4, 4), (0, 7, 0)
#: The first release whose dataset writer is a separate object (resume, one finalize), and
#: whose Diffusion predicts from a history carried in the batch.
_WRITER_SPLIT = (0, 6, 0)
#: The first release whose rollout passes NEW_ROLLOUT_OPTION and whose MetaWorld is seeded.
_SEEDED_ROLLOUTS = (0, 6, 1)
#: The gym-aloha releases whose ``AlohaEnv._make_env_task`` :mod:`.aloha` overrides.
GYM_ALOHA = ">=0.1,<0.2"


class LeRobotVersionError(HudError, ImportError):
    """The installed lerobot is missing or outside :data:`SUPPORTED`."""


def _parse(text: str) -> tuple[int, int, int]:
    """``"0.6.1"`` / ``"0.7.0rc1"`` / ``"0.5"`` -> ``(major, minor, patch)``."""
    parts = [int(p) for p in re.findall(r"\d+", text)[:3]]
    return (*parts, 0, 0, 0)[:3]  # type: ignore[return-value]


@functools.cache
def lerobot_version() -> tuple[int, int, int]:
    """The installed lerobot's ``(major, minor, patch)``; raises LeRobotVersionError
    naming the install command when lerobot is not installed."""
    try:
        text = version("lerobot")
    except PackageNotFoundError:
        raise LeRobotVersionError(
            f"lerobot is not installed; expected lerobot{SUPPORTED}; "
            "fix: pip install 'pytest-hud[lerobot]'"
        ) from None
    return _parse(text)


def require_supported() -> tuple[int, int, int]:
    """The installed version, or one clear error when it is outside :data:`SUPPORTED`
    (too old: upgrade; too new: the newest release pytest-hud is tested with)."""
    found = lerobot_version()
    if _LOWEST <= found < _BEYOND:
        return found
    shown = ".".join(map(str, found))
    which = "older than" if found < _LOWEST else "newer than"
    raise LeRobotVersionError(
        f"pytest-hud supports lerobot{SUPPORTED}; installed: lerobot {shown}, {which} "
        f"that range; fix: pip install 'lerobot{SUPPORTED}'"
    )


def require_gym_aloha() -> None:
    """One clear error unless gym-aloha is a release whose ``_make_env_task`` builds the
    task :mod:`.aloha` re-renders (:data:`GYM_ALOHA`)."""
    try:
        found = _parse(version("gym-aloha"))
    except PackageNotFoundError:
        raise LeRobotVersionError(
            "gym-aloha is not installed; fix: pip install 'lerobot[aloha]'"
        ) from None
    if not (0, 1, 0) <= found < (0, 2, 0):
        raise LeRobotVersionError(
            f"a reduced ALOHA camera needs gym-aloha{GYM_ALOHA}; installed: "
            f"{'.'.join(map(str, found))}; fix: pip install 'gym-aloha{GYM_ALOHA}', or leave "
            "observation_height / observation_width unset"
        )


def finalize_is_final() -> bool:
    """Whether ``LeRobotDataset.finalize()`` ends that dataset object's writing (0.6+)."""
    return lerobot_version() >= _WRITER_SPLIT


def open_for_append(dataset_cls: type[LeRobotDataset], repo_id: str, root: Path) -> LeRobotDataset:
    """The dataset at ``root`` opened for more episodes."""
    if lerobot_version() >= _WRITER_SPLIT:
        return dataset_cls.resume(repo_id, root=root)
    return dataset_cls(repo_id, root=root)


def prepare_save(ds: LeRobotDataset, frame: Mapping[str, np.ndarray]) -> None:
    """Before ``save_episode``: up to 0.5, hand the buffered one-element numeric features of
    ``frame``'s layout to lerobot as 0-d values (``episode_buffer`` is 0.4's public buffer
    of the open episode there; add_frame validated them as ``(1,)``)."""
    if lerobot_version() >= _WRITER_SPLIT:
        return
    buffer = ds.episode_buffer
    for key, value in frame.items():
        if value.dtype != np.uint8 and value.shape == (1,):
            buffer[key] = [np.asarray(v).reshape(()) for v in buffer[key]]


def new_rollout_options() -> dict[str, bool]:
    """The reset options lerobot-eval's rollout passes at the start of every rollout
    (``{NEW_ROLLOUT_OPTION: True}`` from 0.6.1; none before)."""
    if lerobot_version() < _SEEDED_ROLLOUTS:
        return {}
    from lerobot.envs.utils import NEW_ROLLOUT_OPTION

    return {NEW_ROLLOUT_OPTION: True}


def metaworld_resets_are_seeded() -> bool:
    """Whether LeRobot's MetaWorld env places its objects from ``reset(seed=...)`` (0.6.1+);
    before, from NumPy's global random state, so episodes do not repeat by seed."""
    return lerobot_version() >= _SEEDED_ROLLOUTS


def no_env_eval_flag() -> str:
    """The ``lerobot-train`` flag that turns its periodic env evaluation off."""
    return "--env_eval_freq=0" if lerobot_version() >= _WRITER_SPLIT else "--eval_freq=0"


# -- episode length: the attribute lerobot-eval's rollout reads ----------------------------
def episode_limit(vec: VectorEnv) -> int:
    """The episode length lerobot-eval's rollout gives ``vec``'s episodes (its copies'
    ``_max_episode_steps``, read through the vector env's public ``call``)."""
    return int(vec.call("_max_episode_steps")[0])


def cap_episodes(vec: VectorEnv, steps: int) -> None:
    """Episodes of ``vec`` end after ``steps`` under lerobot-eval's rollout and
    :class:`.envs.LeRobotVectorEnv` alike (set through the vector env's ``set_attr``)."""
    vec.set_attr("_max_episode_steps", int(steps))


# -- history policies ----------------------------------------------------------------------
def predict_from_history(
    policy: PreTrainedPolicy, history: list[dict[str, torch.Tensor]]
) -> torch.Tensor:
    """The chunk ``select_action`` would predict with ``history`` (preprocessed batches,
    oldest first) as the policy's last observations, leaving the policy reset.

    The window is what LeRobot's ``populate_queues`` keeps: the first observation repeated
    until ``n_obs_steps`` are queued, later ones pushing the oldest out. Diffusion from 0.6
    takes it in the batch (public API); otherwise it goes through the policy's queues (see
    the module doc for why).
    """
    import torch

    config = policy.config
    image_keys = list(getattr(config, "image_features", None) or [])
    policy.reset()
    try:
        if config.type == "diffusion" and lerobot_version() >= _WRITER_SPLIT:
            steps = int(config.n_obs_steps)
            window = ([history[0]] * steps + history[1:])[-steps:]
            batch = dict(history[-1])
            for key in config.input_features:
                batch[key] = torch.stack([step[key] for step in window], dim=1)
            return policy.predict_action_chunk(batch)
        from lerobot.policies.utils import populate_queues

        obs: dict[str, torch.Tensor] = {}
        for step in history:
            obs = {k: v for k, v in step.items() if k != "action"}
            if image_keys and "observation.images" in policy._queues:
                obs["observation.images"] = torch.stack([obs[k] for k in image_keys], dim=-4)
            policy._queues = populate_queues(policy._queues, obs)
        return policy.predict_action_chunk(obs)
    finally:
        policy.reset()
