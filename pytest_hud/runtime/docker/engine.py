"""The docker engine as the runtime uses it: the lazily imported SDK, worker threads for its
blocking calls, shared labels and ports, and the forwarded host variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pytest_hud.errors import SubstrateError
from pytest_hud.plumbing.process import environ_snapshot

__all__ = ["image_digest", "require_engine"]

log = logging.getLogger(__name__)

#: Every container DockerRuntime starts carries ``pytest-hud=1`` and ``pytest-hud.*`` labels.
LABEL = "pytest-hud"
#: The image env var (or ``pytest-hud.module`` label) naming the env module to serve.
MODULE_ENV = "PYTEST_HUD_MODULE"
#: The project's dependencies a container needs (not pytest, pytest-html, xdist, docker).
RUNTIME_DEPS = ("numpy", "msgpack", "websockets", "gymnasium")
REMOVE_TIMEOUT = 60.0
LOG_TAIL = 40
#: MuJoCo's and PyOpenGL's backend choice (``MUJOCO_GL=osmesa``) and the EGL device a GPU
#: machine renders on: set on the host, they select the same in the image
RENDER_VARS = frozenset({"MUJOCO_GL", "PYOPENGL_PLATFORM", "MUJOCO_EGL_DEVICE_ID"})
#: ``PYTEST_HUD_*`` variables that describe this host, not the run: the module to serve
#: (the image names its own), the stdin lifeline (a container has none), the cache path
_NOT_FORWARDED = frozenset({MODULE_ENV, "PYTEST_HUD_LIFELINE", "PYTEST_HUD_CACHE"})

T = TypeVar("T")


# -- the SDK, a client, worker threads ------------------------------------------------------
def _sdk() -> Any:
    try:
        import docker
    except ImportError:
        raise ImportError(
            "DockerRuntime needs the docker SDK: pip install 'pytest-hud[docker]'"
        ) from None
    return docker


def _client(client: object = None) -> Any:
    """``client`` as given, else one from the environment (DOCKER_HOST, the local socket)."""
    if client is not None:
        return client
    docker = _sdk()
    try:
        return docker.from_env(max_pool_size=32)
    except docker.errors.DockerException as exc:
        raise _unreachable(exc) from None


def _unreachable(exc: BaseException) -> SubstrateError:
    return SubstrateError(
        f"cannot reach a Docker engine ({exc}); start one (systemctl start docker, or "
        "dockerd & as root) or point DOCKER_HOST at one"
    )


def require_engine(timeout: float = 10.0) -> None:
    """Raise SubstrateError (naming the fix) unless an engine answers a ping within
    ``timeout`` s: a session on the docker runtime checks once before any item, so a
    stopped engine is one line, not the same error on every item (32 of them for 32 rows)."""
    docker = _sdk()
    try:
        client = docker.from_env(timeout=max(1, int(timeout)))
        try:
            client.ping()
        finally:
            client.close()
    except (docker.errors.DockerException, OSError) as exc:
        raise _unreachable(exc) from None


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


async def _blocking(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """Run a blocking (docker SDK) call in a worker thread."""
    global _executor
    with _executor_lock:
        if _executor is None:
            # own pool: many containers booting at once must not starve the default one
            _executor = ThreadPoolExecutor(32, thread_name_prefix="pytest-hud-docker")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, functools.partial(fn, *args, **kwargs))


async def _settled(
    fn: Callable[..., T], /, *args: object, undo: Callable[[T], Any] | None = None
) -> T:
    """Like _blocking, but a cancelled caller still waits for the call, then ``undo``es it."""
    fut = asyncio.ensure_future(_blocking(fn, *args))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            result = await asyncio.shield(fut)
            if undo is not None:
                await asyncio.shield(asyncio.ensure_future(_blocking(undo, result)))
        raise


def _forwarded_env() -> dict[str, str]:
    """The host variables a container of ``--hud-runtime=docker[:IMAGE]`` gets:
    ``PYTEST_HUD_*`` (``PYTEST_HUD_METAWORLD_CAMERAS`` configures a module the same way
    in the image) and the render backend (:data:`RENDER_VARS`: MuJoCo binds its GL
    platform at import from them)."""
    return {  # environ_snapshot: pytest's thread sets and deletes PYTEST_CURRENT_TEST meanwhile
        k: v
        for k, v in environ_snapshot().items()
        if (k.startswith("PYTEST_HUD_") and k not in _NOT_FORWARDED) or k in RENDER_VARS
    }


def _force_remove(container: Any) -> None:
    docker = _sdk()
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: its removal is already in progress
            raise


def image_digest(image: str, timeout: float = 10.0) -> str | None:
    """The image's repo digest (``name@sha256:...``) or, for a local-only build, its id;
    ``None`` without the docker SDK, an engine, or the image."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:
        return None
    try:
        client = docker.from_env(timeout=int(timeout))
    except DockerException:
        return None
    try:
        attrs = client.images.get(image).attrs
    except (DockerException, OSError):
        return None
    finally:
        client.close()
    digests = attrs.get("RepoDigests") or []
    if digests:
        return str(digests[0])
    ident = attrs.get("Id")
    return str(ident) if ident else None
