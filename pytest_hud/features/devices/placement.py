"""Which devices a session's models go on and which worker uses which (no pytest here).

``--hud-devices`` is ``auto`` (every GPU this process sees, else the CPU) or a list such as
``cuda:0,cuda:1``. ``CUDA_VISIBLE_DEVICES`` is honoured as torch honours it: ``cuda:i`` is the
i-th GPU it lists, and a server placed on ``cuda:i`` is started seeing that one GPU alone
(:func:`visible_to`), so a factory that says ``cuda`` lands there too. Worker ``gwN`` uses
device ``N mod n`` of the ``n`` devices in use, shared or per worker.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "AUTO",
    "PLACEMENTS",
    "check_devices",
    "device_of",
    "gpu_count",
    "parse_devices",
    "resolve",
    "visible_to",
    "worker_index",
]

AUTO = "auto"
#: ``shared``: one model per device, served to every worker; ``worker``: a copy per worker
PLACEMENTS = ("shared", "worker")
_DEVICE = re.compile(r"^(cpu|mps|cuda:\d+)$")
#: what CUDA_VISIBLE_DEVICES holds when no GPU may be used
_NONE = {"", "-1", "none", "nodevfiles"}


def parse_devices(text: str) -> tuple[str, ...]:
    """``--hud-devices``: ``("auto",)``, or the devices listed (``cuda`` is ``cuda:0``); a
    ValueError naming the forms for anything else."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if names == [AUTO]:
        return (AUTO,)
    names = ["cuda:0" if n == "cuda" else n for n in names]
    wrong = [n for n in names if not _DEVICE.match(n)]
    if not names or wrong:
        raise ValueError(
            f"takes auto or a comma-separated list of cpu, mps or cuda:N (e.g. cuda:0,cuda:1), "
            f"got {text!r}"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"lists a device twice: {text!r}")
    return tuple(names)


def _cuda_visible() -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (None: unset, so every GPU)."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    if raw.strip().lower() in _NONE:
        return []
    return [e.strip() for e in raw.split(",") if e.strip()]


def _no_driver() -> bool:
    """No NVIDIA driver on this machine (nothing for torch to find): told without importing
    torch, which costs a second or two per process."""
    return not Path("/proc/driver/nvidia/gpus").is_dir() and not Path("/dev/nvidia0").exists()


def gpu_count() -> int:
    """The GPUs this process may use: torch's count (which honours CUDA_VISIBLE_DEVICES),
    0 without a driver or without torch."""
    visible = _cuda_visible()
    if visible == [] or _no_driver():
        return 0
    try:
        import torch
    except ImportError:
        return 0
    if not torch.cuda.is_available():
        return 0
    count = int(torch.cuda.device_count())
    return count if visible is None else min(count, len(visible))


def resolve(devices: Sequence[str]) -> tuple[str, ...]:
    """The devices named: ``auto`` is every visible GPU (``cuda:0``...), else the CPU."""
    if tuple(devices) != (AUTO,):
        return tuple(devices)
    count = gpu_count()
    return tuple(f"cuda:{i}" for i in range(count)) if count else ("cpu",)


def check_devices(devices: Sequence[str]) -> str | None:
    """What is wrong with running on ``devices`` here (a GPU that is not visible), or None."""
    wanted = [d for d in devices if d.startswith("cuda:")]
    if not wanted:
        return None
    count = gpu_count()
    missing = [d for d in wanted if int(d.partition(":")[2]) >= count]
    if not missing:
        return None
    seen = "no GPU" if not count else f"{count} GPU(s), cuda:0..cuda:{count - 1}"
    return (
        f"names {', '.join(missing)}, but this process sees {seen} "
        f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); fix: "
        "--hud-devices=auto, or a device it sees"
    )


def visible_to(device: str) -> dict[str, str]:
    """The environment a process placed on ``device`` alone starts with: for ``cuda:i``,
    ``CUDA_VISIBLE_DEVICES`` naming that one GPU (its number or id as the session's own
    ``CUDA_VISIBLE_DEVICES`` lists it), so the process sees it as ``cuda:0``."""
    if not device.startswith("cuda:"):
        return {}
    index = int(device.partition(":")[2])
    visible = _cuda_visible()
    physical = visible[index] if visible is not None and index < len(visible) else str(index)
    return {"CUDA_VISIBLE_DEVICES": physical}


def worker_index(worker: str) -> int:
    """``gw3`` -> 3 (0 for an id of another shape)."""
    digits = re.sub(r"\D", "", worker)
    return int(digits) if digits else 0


def device_of(worker: str, devices: Sequence[str]) -> str:
    """The device worker ``worker`` uses: device ``N mod n`` for ``gwN``."""
    return devices[worker_index(worker) % len(devices)]
