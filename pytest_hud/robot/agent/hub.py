"""Resolve a Hugging Face Hub checkpoint id without waiting on an unreachable hub.

Offline, ``from_pretrained("lerobot/pi05_libero_finetuned")`` does not fail fast:
huggingface_hub retries its requests with backoff, which cost ~21 s per attempt here
and, once per test item, 4 min 40 s for a 13-item session before the first error. So a
hub id is first looked up in the local hub cache (no network); when it is not there we
fail at once if the hub is off (``HF_HUB_OFFLINE``) or its host name does not resolve
(one lookup, bounded), and only otherwise leave the download to lerobot.
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlparse

from pytest_hud.robot.agent.errors import CheckpointError

__all__ = ["cached_or_reachable", "hub_offline"]

_TRUE = {"1", "on", "yes", "true"}
#: Seconds one name lookup of the hub's host may take before we call it unreachable.
LOOKUP_TIMEOUT = 5.0


def hub_offline() -> bool:
    """Whether the user turned the hub off (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return any(
        os.environ.get(var, "").strip().lower() in _TRUE
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _endpoint_host() -> str:
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    return urlparse(endpoint).hostname or "huggingface.co"


def _resolves(host: str, timeout: float) -> str | None:
    """None when ``host`` resolves within ``timeout``, else why not (one lookup, no dial)."""
    outcome: list[str | None] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, 443)
            outcome.append(None)
        except OSError as exc:
            outcome.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=lookup, daemon=True, name="pytest-hud-hub-lookup")
    thread.start()
    thread.join(timeout)
    return outcome[0] if outcome else f"no answer for {host!r} within {timeout:g} s"


def cached_or_reachable(repo_id: str, *, hint: str) -> str:
    """The local snapshot folder of ``repo_id`` if cached, else ``repo_id`` when the hub
    is reachable; raises :class:`CheckpointError` (ending with ``hint``) at once otherwise."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return str(snapshot_download(repo_id, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    if hub_offline():
        reason = "HF_HUB_OFFLINE is set and it is not in the local hub cache"
    else:
        host = _endpoint_host()
        why = _resolves(host, LOOKUP_TIMEOUT)
        if why is None:
            return repo_id
        reason = f"the hub is unreachable ({host}: {why}) and it is not in the local hub cache"
    raise CheckpointError(f"cannot load {repo_id!r}: {reason}. {hint}", reason=reason)
