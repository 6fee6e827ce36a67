"""Where Ray places a row: its ``runtime_config`` as Ray ``.options(...)``, and why no
node of the cluster could ever hold a request (so it fails at once instead of pending)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_hud.runtime.task import Task, memory_mib

__all__ = ["feasibility", "placement_options", "requested"]


def requested(options: Mapping[str, Any]) -> dict[str, float]:
    asked = {"CPU": float(options.get("num_cpus") or 0), "GPU": float(options.get("num_gpus") or 0)}
    asked["memory"] = float(options.get("memory") or 0)
    asked.update({k: float(v) for k, v in (options.get("resources") or {}).items()})
    return {k: v for k, v in asked.items() if v > 0}


def feasibility(asked: Mapping[str, float]) -> str | None:
    """Why no alive node could ever hold ``asked`` (None when one could)."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    for node in nodes:
        total = node.get("Resources", {})
        if all(total.get(k, 0.0) >= v for k, v in asked.items()):
            return None
    totals = [
        f"{n['NodeID'][:8]}@{n['NodeManagerAddress']}: {_public(n.get('Resources', {}))}"
        for n in nodes
    ]
    return (
        f"no node of the Ray cluster can ever hold it: asked {asked}; the nodes have "
        f"{'; '.join(totals) or 'none'}; available now: "
        f"{_public(ray.available_resources())}. Fix: lower the row's runtime_config, or add "
        "a node with those resources (ray start --resources='{...}')"
    )


def _public(resources: Mapping[str, float]) -> dict[str, float]:
    return {k: v for k, v in sorted(resources.items()) if not k.startswith("node:")}


def placement_options(
    task: Task,
    *,
    num_cpus: float = 1,
    num_gpus: float | None = None,
    memory: int | str | None = None,
    resources: Mapping[str, float] | None = None,
    runtime_env: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Ray ``.options(...)`` placing ``task``: its runtime_config (cpu, gpu count, memory,
    custom resources) on top of the given defaults."""
    cfg = task.runtime_config
    merged = {**(resources or {}), **dict(cfg.resources if cfg is not None else ())}
    cpu = cfg.cpu if cfg is not None and cfg.cpu is not None else num_cpus
    gpu: Any = cfg.gpu if cfg is not None and cfg.gpu is not None else num_gpus
    mib = memory_mib((cfg.memory if cfg is not None else None) or memory)
    options: dict[str, object] = {"num_cpus": float(cpu)}
    if gpu is not None:
        try:
            options["num_gpus"] = float(gpu)
        except ValueError:
            raise ValueError(f"Ray takes a GPU count (gpu=1), got {gpu!r}") from None
    if mib is not None:
        options["memory"] = math.ceil(mib * 1024 * 1024)
    if merged:
        options["resources"] = {k: float(v) for k, v in merged.items()}
    if runtime_env is not None:
        options["runtime_env"] = dict(runtime_env)
    return options
