"""Creates in flight: each container create first writes an intent file, so :func:`settle_intents`
can remove what the engine creates after its owner died.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from pytest_hud.plumbing.private_dir import open_private, private_dir
from pytest_hud.runtime.docker.engine import LABEL, _client, _force_remove
from pytest_hud.runtime.docker.owners import _owner_alive, _proc_start

__all__ = ["INTENT_LABEL", "create_container", "settle_intents"]

log = logging.getLogger(__name__)

INTENT_LABEL = f"{LABEL}.intent"
#: how long an intent file may name a create the engine may still be serving; older
#: ones are looked up once, not waited for (the engine's event history is finite)
RECENT = 120.0


def _folder() -> Path:
    """This user's own folder of intents (mode 0700, in ``$PYTEST_HUD_INTENTS`` when set):
    in the shared temp folder another user could plant files that settle_intents reads,
    or make the folder a link to one whose files it would delete."""
    return private_dir("pytest-hud-creates", "PYTEST_HUD_INTENTS")


def create_container(client: Any, kwargs: dict[str, Any]) -> object:
    """``client.containers.create(**kwargs)`` behind an intent file (blocking)."""
    folder = _folder()
    pid = os.getpid()
    name = f"{pid}.{_proc_start(pid) or 0}.{uuid.uuid4().hex[:12]}"
    path = folder / name
    os.close(open_private(path))
    labels = {**(kwargs.get("labels") or {}), INTENT_LABEL: name}
    try:
        return client.containers.create(**{**kwargs, "labels": labels})
    finally:
        path.unlink(missing_ok=True)


def _dead(name: str) -> bool:
    pid, start, _ = [*name.split("."), "", "", ""][:3]
    labels = {f"{LABEL}.pid": pid, **({f"{LABEL}.pidstart": start} if start != "0" else {})}
    return not _owner_alive(labels)


def settle_intents(client: Any = None, timeout: float = 20.0) -> list[str]:
    """Remove the containers of creates whose owner died, waiting up to ``timeout`` s for
    the engine to finish recent ones; returns the removed ids."""
    folder = _folder()
    pending = {p.name: p for p in folder.glob("*.*.*") if _dead(p.name)}
    if not pending:
        return []
    client = _client(client)
    removed: list[str] = []

    def resolve(name: str) -> bool:
        found = client.containers.list(
            all=True, sparse=True, filters={"label": f"{INTENT_LABEL}={name}"}
        )
        for container in found:
            with contextlib.suppress(Exception):
                _force_remove(container)
                removed.append(container.id)
        return bool(found)

    now = time.time()
    for name, path in list(pending.items()):
        old = now - path.stat().st_mtime > RECENT
        if resolve(name) or old:
            pending.pop(name)
            path.unlink(missing_ok=True)
    if pending:
        since = min(p.stat().st_mtime for p in pending.values()) - 1
        events = client.events(
            since=int(since),
            until=int(time.time() + timeout) + 1,
            filters={"type": "container", "event": "create", "label": INTENT_LABEL},
            decode=True,
        )
        try:
            for event in events:
                intent = (event.get("Actor", {}).get("Attributes") or {}).get(INTENT_LABEL)
                if intent in pending and resolve(intent):
                    pending.pop(intent).unlink(missing_ok=True)
                if not pending:
                    break
        finally:
            with contextlib.suppress(Exception):
                events.close()
    for name, path in pending.items():  # the engine never created it: nothing to remove
        log.warning("docker create %s of a dead process never completed; dropping it", name)
        path.unlink(missing_ok=True)
    if removed:
        log.info("removed %d container(s) created after their owner died", len(removed))
    return removed
