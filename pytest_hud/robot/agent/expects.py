"""What an agent's policy expects, as a :class:`~pytest_hud.robot.compat.PolicySpec`, from a
checkpoint, a server's metadata or a Model's ``policy_spec()``. Agent side only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_hud.robot.agent.agent import RobotAgent
from pytest_hud.robot.compat import Need, PolicySpec

__all__ = ["METADATA_KEY", "declares", "lerobot_spec", "metadata_entry", "policy_spec"]

#: The metadata frame's entry where a policy server publishes its PolicySpec.
METADATA_KEY = "policy"

_KINDS = {"VISUAL": "camera", "STATE": "state", "ENV": "env_state", "ACTION": "action"}


def _name(value: object) -> str:
    return str(getattr(value, "name", None) or getattr(value, "value", None) or value)


def _normalizer_stats(processor: object) -> dict[str, dict[str, list[float]]]:
    """Per key, the flat stats of a processor pipeline's (un)normalizer steps."""
    out: dict[str, dict[str, list[float]]] = {}
    for step in getattr(processor, "steps", None) or ():
        stats = getattr(step, "stats", None)
        if not isinstance(stats, dict):
            continue
        for key, entry in stats.items():
            if not isinstance(entry, dict):
                continue
            flat = {}
            for stat, value in entry.items():
                arr = value.detach().cpu().numpy() if hasattr(value, "detach") else value
                flat[str(stat)] = np.asarray(arr, np.float64).reshape(-1).tolist()
            out.setdefault(str(key), {}).update(flat)
    return out


def lerobot_spec(
    model: Any,
    source: str,
    *,
    chunk: int | None = None,
    camera_map: dict[str, str] | None = None,
) -> PolicySpec:
    """A LeRobotModel's policy: features from its config, stats from its processors."""
    config = model.policy.config
    stats = _normalizer_stats(model.preprocess)
    for key, entry in _normalizer_stats(model.postprocess).items():
        stats.setdefault(key, {}).update(entry)
    norms = {
        _name(k): _name(v) for k, v in (getattr(config, "normalization_mapping", {}) or {}).items()
    }
    features = {
        **(getattr(config, "input_features", None) or {}),
        **(getattr(config, "output_features", None) or {}),
    }
    needs = []
    for key, feature in features.items():
        ftype = _name(getattr(feature, "type", ""))
        kind = _KINDS.get(ftype)
        if kind is None:
            continue
        shape = tuple(int(d) for d in getattr(feature, "shape", ()) or ())
        if kind == "camera" and len(shape) == 3:
            shape = (shape[1], shape[2], shape[0])  # CHW -> HWC, as the contract writes it
        norm = norms.get(ftype)
        needs.append(Need(str(key), kind, shape or None, stats.get(str(key)), norm))
    steps = chunk if chunk is not None else getattr(model, "n_action_steps", None)
    return PolicySpec(source, tuple(needs), int(steps) if steps else None, dict(camera_map or {}))


def _lerobot_model() -> type:
    from pytest_hud.robot.agent.lerobot import LeRobotModel  # imports neither torch nor lerobot

    return LeRobotModel


def declares(agent: object) -> bool:
    """Whether the agent's policy can say what it expects (so a preflight has a subject)."""
    from pytest_hud.robot.agent.remote import RemoteModel

    model = getattr(agent, "model", None)
    if not isinstance(agent, RobotAgent) or model is None:
        return False
    lerobot = _lerobot_model()
    return isinstance(model, (lerobot, RemoteModel)) or callable(
        getattr(model, "policy_spec", None)
    )


async def policy_spec(agent: RobotAgent, source: str) -> PolicySpec | None:
    """The agent's PolicySpec (None: its model declares nothing). A RemoteModel is asked
    on the calling task's connection, which its rollout then reuses."""
    from pytest_hud.robot.agent.remote import RemoteModel

    model = agent.model
    own = getattr(model, "policy_spec", None)
    if callable(own):
        found = own()
        return found if isinstance(found, PolicySpec) else None
    if isinstance(model, _lerobot_model()):
        camera_map = getattr(agent.adapter, "camera_map", None) or {}
        return lerobot_spec(model, source, chunk=agent.chunk_size, camera_map=camera_map)
    if isinstance(model, RemoteModel):
        meta = await model.connect()
        entry = meta.get(METADATA_KEY)
        if isinstance(entry, dict):
            spec = PolicySpec.from_dict(entry, source)
            if agent.chunk_size is not None:
                spec = PolicySpec(spec.source, spec.needs, agent.chunk_size, spec.camera_map)
            return spec
        return PolicySpec(source, (), agent.chunk_size)
    return None


def metadata_entry(model: object, source: str) -> dict[str, object]:
    """``{"policy": ...}`` for a policy server's metadata frame when ``model`` declares
    its inputs (a LeRobot checkpoint), else ``{}``."""
    own = getattr(model, "policy_spec", None)
    if callable(own):
        found = own()
        return {METADATA_KEY: found.to_dict()} if isinstance(found, PolicySpec) else {}
    if isinstance(model, _lerobot_model()):
        return {METADATA_KEY: lerobot_spec(model, source).to_dict()}
    return {}
