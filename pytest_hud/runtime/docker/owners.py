"""Who owns a container: every one DockerRuntime starts carries its owner's session, pid
and host as labels, so :func:`reap_containers` can remove the leftovers of crashed
sessions (it runs once per process, before the first container of a session)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_hud.runtime.docker.engine import LABEL, _client, _force_remove, _sdk

__all__ = ["owner_labels", "reap_containers", "session_id"]

log = logging.getLogger(__name__)

_session: str | None = None


def session_id() -> str:
    """This process's session id: $PYTEST_HUD_SESSION, else a uuid made once per process."""
    global _session
    if _session is None:
        _session = os.environ.get("PYTEST_HUD_SESSION") or uuid.uuid4().hex[:12]
    return _session


def _proc_start(pid: int) -> str | None:
    """The start time (clock ticks since boot) of a process, to tell a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_labels() -> dict[str, str]:
    labels = {
        LABEL: "1",
        f"{LABEL}.session": session_id(),
        f"{LABEL}.pid": str(os.getpid()),
        f"{LABEL}.host": socket.gethostname(),
    }
    start = _proc_start(os.getpid())
    if start is not None:
        labels[f"{LABEL}.pidstart"] = start
    return labels


def _owner_alive(labels: Mapping[str, str]) -> bool:
    """Whether the process named by a container's labels still runs (unknown counts as alive)."""
    try:
        pid = int(labels.get(f"{LABEL}.pid", ""))
    except ValueError:
        return True
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _zombie(pid):  # dead, not yet reaped (no init reaping orphans, e.g. in a container)
        return False
    started = labels.get(f"{LABEL}.pidstart")
    now = _proc_start(pid)
    return not (started and now is not None and now != started)  # else: the pid was reused


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (``kill(pid, 0)`` still succeeds):
    a session SIGKILLed with its workers left them so, and their containers unreaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except (OSError, IndexError):
        return False


def reap_containers(client: Any = None) -> list[str]:
    """Remove pytest-hud containers of this host whose owner process is gone; their ids.

    Only containers labelled ``pytest-hud=1`` and ``pytest-hud.host=<this host>`` are
    looked at; one is removed when the pid in its ``pytest-hud.pid`` label no longer
    runs (or was reused by another process).
    """
    client = _client(client)
    docker = _sdk()
    host = socket.gethostname()
    filters = {"label": [f"{LABEL}=1", f"{LABEL}.host={host}"]}
    removed: list[str] = []
    # ignore_removed: a container removed between the list and its inspect (a removal racing
    # this reap, e.g. its own session's exit) is not an error.
    for container in client.containers.list(all=True, filters=filters, ignore_removed=True):
        labels = container.labels or {}
        if labels.get(LABEL) != "1" or labels.get(f"{LABEL}.host") != host:
            continue
        if _owner_alive(labels):
            continue
        try:
            _force_remove(container)
        except docker.errors.APIError as exc:
            log.warning("could not reap container %s: %s", container.short_id, exc)
            continue
        removed.append(container.id)
    if removed:
        log.info("reaped %d container(s) of dead pytest-hud sessions", len(removed))
    return removed


_reaped_in: int | None = None
_reap_lock = threading.Lock()


def _reap_once(client: object) -> None:
    global _reaped_in
    with _reap_lock:
        if _reaped_in == os.getpid():
            return
        _reaped_in = os.getpid()
    try:
        reap_containers(client)
    except Exception as exc:  # reaping is hygiene: never fail a rollout for it
        log.warning("could not reap leftover pytest-hud containers: %s", exc)
