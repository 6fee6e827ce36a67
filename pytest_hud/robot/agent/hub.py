"""Resolve a Hub checkpoint id without waiting on an unreachable hub: the local cache first, then
fail at once when the hub is off or unreachable.
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlparse

from pytest_hud.errors import CheckpointError

__all__ = ["cached_or_reachable", "hub_offline", "require_hub_checkpoint"]

_TRUE = {"1", "on", "yes", "true"}
#: Seconds one name lookup of the hub's host, and one connect to it, may take.
LOOKUP_TIMEOUT = 5.0
CONNECT_TIMEOUT = 5.0


def hub_offline() -> bool:
    """Whether the user turned the hub off (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return any(
        os.environ.get(var, "").strip().lower() in _TRUE
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _endpoint() -> tuple[str, int]:
    parsed = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    return parsed.hostname or "huggingface.co", port


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


def _connects(host: str, port: int, timeout: float) -> str | None:
    """None when one TCP connect to ``host:port`` succeeds within ``timeout``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"connecting to {host}:{port}: {type(exc).__name__}: {exc}"


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
        reason = "it is not in the local hub cache and HF_HUB_OFFLINE is set"
        raise CheckpointError(f"cannot load {repo_id!r}: {reason}. {hint}", reason=reason)
    host, port = _endpoint()
    why = _resolves(host, LOOKUP_TIMEOUT) or _connects(host, port, CONNECT_TIMEOUT)
    if why is None:
        return repo_id
    reason = f"the hub is unreachable ({why}) and it is not in the local hub cache"
    raise CheckpointError(
        f"cannot fetch the checkpoint {repo_id!r}: {reason}. {hint}", reason=reason
    )


def require_hub_checkpoint(repo_id: str) -> None:
    """Raise CheckpointError (naming the way out) unless ``repo_id`` can be loaded now."""
    cached_or_reachable(
        repo_id,
        hint=(
            f"Fix: download it where the hub is reachable (huggingface-cli download {repo_id}) "
            "and pass its folder, or fill the local hub cache; HF_HUB_OFFLINE=1 uses the "
            "local cache only"
        ),
    )
