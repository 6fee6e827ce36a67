"""Is a hub checkpoint reachable? Answered in seconds, before anything downloads.

Without this, ``--hud-agent=pi05`` on a machine without hub access took 4 min 40 s to
fail (the download retried with back-off), once per item. The check: a checkpoint
already in the local hub cache is fine; ``HF_HUB_OFFLINE=1`` with nothing cached is
an error at once; otherwise one TCP connect to the hub endpoint, bounded, no retries.
"""

from __future__ import annotations

import socket
from urllib.parse import urlparse

from pytest_hud.robot.agent.errors import CheckpointError

__all__ = ["CONNECT_TIMEOUT_S", "require_hub_checkpoint"]

#: one connect attempt to the hub endpoint; a refused port answers at once
CONNECT_TIMEOUT_S = 5.0


def _cached(repo: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, "config.json")
    return isinstance(found, str)


def require_hub_checkpoint(repo: str) -> None:
    """Raise CheckpointError (naming the way out) unless ``repo`` can be loaded now."""
    if _cached(repo):
        return
    from huggingface_hub import constants

    fix = (
        "download it where the hub is reachable (huggingface-cli download "
        f"{repo}) and pass its folder, or fill the local hub cache"
    )
    if constants.HF_HUB_OFFLINE:
        raise CheckpointError(
            f"the checkpoint {repo!r} is not in the local hub cache and HF_HUB_OFFLINE is "
            f"set, so it cannot be downloaded; {fix}",
            reason="offline (HF_HUB_OFFLINE) and not cached",
        )
    endpoint = urlparse(constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = f"the hub at {constants.ENDPOINT} is unreachable ({type(exc).__name__}: {exc})"
        raise CheckpointError(
            f"cannot fetch the checkpoint {repo!r}: {reason}; set HF_HUB_OFFLINE=1 to use "
            f"the local cache only, or {fix}",
            reason=reason,
        ) from None
