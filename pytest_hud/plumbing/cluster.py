"""Joining a Ray cluster once per process, loopback kept loopback. In the shared bottom because
placement and the agent side's policy replicas both need it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import Any

from pytest_hud.plumbing.reaper import Reaper

__all__ = ["connect"]

log = logging.getLogger(__name__)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_connect_lock = threading.Lock()


def _loopback_mode() -> None:
    """Make Ray resolve localhost to 127.0.0.1 (here and in processes it spawns), and take
    Ray's token auth as chosen (``RAY_AUTH_MODE``), else off, as for the clusters pytest-hud
    starts (:func:`pytest_hud.runtime.ray.head.ray_env`): unset, Ray 2.60 decides by
    whether some earlier Ray left ``~/.ray/auth_token``, so a head and its clients could
    decide differently."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray._private.ray_constants as constants

    constants.ENABLE_RAY_CLUSTER = False


def connect(address: str | None = None, runtime_env: Mapping[str, object] | None = None) -> None:
    """Join (or start) the Ray cluster once per process; see the module docs."""
    import ray

    with _connect_lock:
        if ray.is_initialized():
            return
        address = address or os.environ.get("RAY_ADDRESS") or None
        host = (address or "").removeprefix("ray://").rpartition(":")[0]
        kwargs: dict[str, Any] = {"log_to_driver": False, "runtime_env": runtime_env}
        if address is None or host in _LOOPBACK:
            _loopback_mode()
        if address is None:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            kwargs.update(include_dashboard=False, _node_ip_address="127.0.0.1")
            kwargs["_temp_dir"] = _own_temp_dir()
        elif not address.startswith("ray://") and host in _LOOPBACK:
            kwargs["_node_ip_address"] = "127.0.0.1"
        if address is not None and address.startswith("ray://"):
            _init_client(address, kwargs)
        else:
            ray.init(address=address, **kwargs)


def _own_temp_dir() -> str:
    """The folder of the local cluster this process starts, removed at its exit (after
    Ray's shutdown, which stops the cluster's processes). Ray's default, ``$TMPDIR/ray``,
    keeps every session's folder (logs, sockets) for good, and ``ray.init()`` there joins
    the last cluster started by ``ray start`` instead of one of its own. A watchdog
    (plumbing/reaper.py) finishes the job when this process dies before it did: SIGKILL,
    or a Ctrl-C or SIGTERM while its exit runs."""
    folder = tempfile.mkdtemp(prefix="hud-ray-")
    reaper = Reaper()
    reaper.guard(match=folder, folder=folder)
    atexit.register(_remove_own_cluster, folder, reaper, os.getpid())
    return folder


def _remove_own_cluster(folder: str, reaper: Reaper, owner: int) -> None:
    # runs before Ray's own atexit shutdown (registered when ray was imported, earlier);
    # the watchdog is released only once all is done (an interrupt here leaves it to it)
    if os.getpid() != owner:  # a forked child exiting: the cluster is its parent's
        return
    with contextlib.suppress(Exception):
        import ray

        ray.shutdown()
    shutil.rmtree(folder, ignore_errors=True)
    reaper.release()


# Ray's client proxier starts one server process per client connection; on a loaded
# machine that start can fail outright ("Starting Ray client server failed"), though the
# next connection's start succeeds. It can also fail inspecting a previous connection's
# server that has just exited ("Initialization failure from server ...
# psutil.ZombieProcess"). Retried, bounded.
_CLIENT_START_FAILURES = (
    "Starting Ray client server failed",
    "Proxy failed to Connect",
    "ZombieProcess",
)
_CLIENT_ATTEMPTS = 3


def _init_client(address: str, kwargs: dict[str, Any]) -> None:
    import ray

    for attempt in range(1, _CLIENT_ATTEMPTS + 1):
        try:
            ray.init(address=address, **kwargs)
            return
        except ConnectionError as exc:
            if attempt == _CLIENT_ATTEMPTS or not any(
                m in str(exc) for m in _CLIENT_START_FAILURES
            ):
                raise
            log.warning("Ray client connect to %s failed (%s); retrying", address, exc)
            time.sleep(2.0 * attempt)
