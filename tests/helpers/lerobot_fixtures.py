"""Tiny, randomly initialised LeRobot policies saved like real checkpoints.

No weights can be downloaded here, so tests make their own: a small config, random init,
``save_pretrained`` of the policy and its pre/post-processors into a folder, which then
loads through the same ``from_pretrained`` path a hub checkpoint takes. Statistics are
PushT's: positions and actions in [0, 512] (mean 256, std of a uniform 512/sqrt(12)),
images with ImageNet's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

PUSHT_MAX = 512.0
PUSHT_STD = PUSHT_MAX / np.sqrt(12.0)


def _stats(
    image_keys: Sequence[str],
    state_dim: int,
    action_dim: int,
    span: tuple[float, float] | None = None,
) -> dict:
    """PushT's statistics, or those of a uniform spread over ``span`` (low, high)."""
    low, high = span or (0.0, PUSHT_MAX)

    def spread(dim: int) -> dict[str, np.ndarray]:
        return {
            "mean": np.full(dim, (low + high) / 2, np.float32),
            "std": np.full(dim, (high - low) / np.sqrt(12.0), np.float32),
            "min": np.full(dim, low, np.float32),
            "max": np.full(dim, high, np.float32),
        }

    image = {
        "mean": np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1),
        "std": np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1),
        "min": np.zeros((3, 1, 1), np.float32),
        "max": np.ones((3, 1, 1), np.float32),
    }
    stats = {key: dict(image) for key in image_keys}
    stats["observation.state"] = spread(state_dim)
    stats["action"] = spread(action_dim)
    return stats


def _features(image_keys: Sequence[str], image_shape, state_dim: int, action_dim: int):
    from lerobot.configs.types import FeatureType, PolicyFeature

    inputs = {
        k: PolicyFeature(type=FeatureType.VISUAL, shape=tuple(image_shape)) for k in image_keys
    }
    inputs["observation.state"] = PolicyFeature(type=FeatureType.STATE, shape=(state_dim,))
    outputs = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(action_dim,))}
    return inputs, outputs


def _save(folder: Path, policy, stats: dict) -> Path:
    from lerobot.policies.factory import make_pre_post_processors

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pre, post = make_pre_post_processors(policy.config, dataset_stats=stats)
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return folder


def _keys(image_key: str | Sequence[str]) -> list[str]:
    return [image_key] if isinstance(image_key, str) else list(image_key)


def make_tiny_act(
    folder: str | Path,
    *,
    image_shape: Sequence[int] = (3, 96, 96),
    state_dim: int = 2,
    action_dim: int = 2,
    image_key: str | Sequence[str] = "observation.image",
    seed: int = 0,
    chunk_size: int = 10,
    n_action_steps: int = 8,
    span: tuple[float, float] | None = None,
) -> Path:
    """A ~11M-parameter ACT (resnet18 backbone, random init, dim_model 64, no VAE) saved
    with its processors into ``folder``; ``image_key`` may list several cameras; ``span``:
    the (low, high) its state and action statistics spread over (default PushT's)."""
    import torch
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy

    keys = _keys(image_key)
    inputs, outputs = _features(keys, image_shape, state_dim, action_dim)
    config = ACTConfig(
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        chunk_size=chunk_size,
        n_action_steps=n_action_steps,
        dim_model=64,
        n_heads=2,
        dim_feedforward=128,
        n_encoder_layers=1,
        n_decoder_layers=1,
        use_vae=False,
        latent_dim=8,
        vision_backbone="resnet18",
        pretrained_backbone_weights=None,
    )
    torch.manual_seed(seed)
    policy = ACTPolicy(config)
    return _save(Path(folder), policy, _stats(keys, state_dim, action_dim, span))


def make_tiny_diffusion(
    folder: str | Path,
    *,
    image_shape: Sequence[int] = (3, 96, 96),
    state_dim: int = 2,
    action_dim: int = 2,
    image_key: str | Sequence[str] = "observation.image",
    seed: int = 0,
) -> Path:
    """A small Diffusion policy (n_obs_steps=2, horizon 16, 8 action steps, 5 denoising
    steps, resnet18 backbone, random init) saved with its processors into ``folder``."""
    import torch
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy

    keys = _keys(image_key)
    inputs, outputs = _features(keys, image_shape, state_dim, action_dim)
    config = DiffusionConfig(
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        n_obs_steps=2,
        horizon=16,
        n_action_steps=8,
        down_dims=(64, 128),
        kernel_size=3,
        n_groups=8,
        diffusion_step_embed_dim=32,
        spatial_softmax_num_keypoints=16,
        num_inference_steps=5,
        crop_shape=(84, 84),
        pretrained_backbone_weights=None,
        use_group_norm=True,
    )
    torch.manual_seed(seed)
    policy = DiffusionPolicy(config)
    return _save(Path(folder), policy, _stats(keys, state_dim, action_dim))


def make_untrained_like(source: str | Path, folder: str | Path, *, seed: int = 0) -> Path:
    """The policy of the checkpoint at ``source`` untrained: the same config, random init
    (``seed``), saved with ``save_pretrained`` into ``folder`` beside copies of the
    source's pre/post-processors (the same normalization statistics)."""
    import shutil

    import torch
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class

    source, folder = Path(source), Path(folder)
    config = PreTrainedConfig.from_pretrained(source)
    torch.manual_seed(seed)
    policy = get_policy_class(config.type)(config)
    folder.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(folder)
    for part in source.glob("policy_*processor*"):
        shutil.copy2(part, folder / part.name)
    return folder
