"""DockerRuntime: a fresh container running the env server for every acquisition.

``DockerRuntime("my-env-image")`` starts one container per acquisition running
``python3 -m pytest_hud.serve MODULE`` on port 8000 with robot sims on 8001..800N,
publishes those ports on 127.0.0.1 only (random host ports), waits until the
control channel answers a real ``ping``, and yields a Runtime whose ``host`` and
``port_map`` let the control client rewrite the sims' urls. Exiting removes the
container. Every container is labelled with its owner (session, pid, host), so
``reap_containers()`` can remove the leftovers of crashed sessions, and does once
per process.

``build_image(tag, module=..., extra_files=[...])`` builds such an image without a
registry: a base image with a Python of the host's minor version, plus this project
and its runtime dependencies installed on the host with ``pip install --target``.

The ``docker`` SDK is imported lazily (``pip install 'pytest-hud[docker]'``); its
calls block, so they run in worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pytest_hud.runtime.control import ControlClient, ControlError
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.subprocess import SubstrateError, died_during
from pytest_hud.runtime.task import Task

__all__ = ["DEFAULT_BASE", "DockerRuntime", "build_image", "reap_containers", "session_id"]

log = logging.getLogger(__name__)

#: Every container DockerRuntime starts carries ``pytest-hud=1`` and ``pytest-hud.*`` labels.
LABEL = "pytest-hud"
#: The image env var (or ``pytest-hud.module`` label) naming the env module to serve.
MODULE_ENV = "PYTEST_HUD_MODULE"
DEFAULT_BASE = "pytest-hud-python:3.11"
CONTROL_PORT = 8000
#: The project's dependencies a container needs (not pytest, pytest-html, xdist, docker).
RUNTIME_DEPS = ("numpy", "msgpack", "websockets", "gymnasium")
REMOVE_TIMEOUT = 60.0
LOG_TAIL = 40

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


def _client(client: Any = None) -> Any:
    """``client`` as given, else one from the environment (DOCKER_HOST, the local socket)."""
    if client is not None:
        return client
    docker = _sdk()
    try:
        return docker.from_env(max_pool_size=32)
    except docker.errors.DockerException as exc:
        raise SubstrateError(
            f"cannot reach a Docker engine ({exc}); start one (e.g. .ci/docker-up) "
            "or point DOCKER_HOST at one"
        ) from None


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


async def _blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking (docker SDK) call in a worker thread."""
    global _executor
    with _executor_lock:
        if _executor is None:
            # own pool: many containers booting at once must not starve the default one
            _executor = ThreadPoolExecutor(32, thread_name_prefix="pytest-hud-docker")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, functools.partial(fn, *args, **kwargs))


async def _settled(
    fn: Callable[..., T], /, *args: Any, undo: Callable[[T], Any] | None = None
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


# -- ownership labels and reaping -----------------------------------------------------------
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
    started = labels.get(f"{LABEL}.pidstart")
    now = _proc_start(pid)
    return not (started and now is not None and now != started)  # else: the pid was reused


def _force_remove(container: Any) -> None:
    docker = _sdk()
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: its removal is already in progress
            raise


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
    for container in client.containers.list(all=True, filters=filters):
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


def _reap_once(client: Any) -> None:
    global _reaped_in
    with _reap_lock:
        if _reaped_in == os.getpid():
            return
        _reaped_in = os.getpid()
    try:
        reap_containers(client)
    except Exception as exc:  # reaping is hygiene: never fail a rollout for it
        log.warning("could not reap leftover pytest-hud containers: %s", exc)


# -- the provider ---------------------------------------------------------------------------
class DockerRuntime:
    """A fresh container serving the env module per acquisition (see the module doc).

    ``image``: the default image (a row's ``runtime_config.image`` wins). ``module``:
    the env module inside the image (else the image's ``$PYTEST_HUD_MODULE`` or its
    ``pytest-hud.module`` label). ``sim_ports``: how many robot sim ports (8001..) to
    publish; a module must declare at most that many sims. ``env``: extra container
    environment (a row's ``runtime_config.env`` adds to it). ``network``: a Docker
    network to attach (a bridge; ports are still published). ``command``: run this
    argv instead of the env server (it must serve the control channel on port 8000).
    A row's ``runtime_config`` ``cpu`` and ``memory`` become container limits, ``gpu``
    (``"all"`` or a count) a GPU request.
    """

    def __init__(
        self,
        image: str | None = None,
        *,
        module: str | None = None,
        boot_timeout: float = 120.0,
        sim_ports: int = 8,
        env: Mapping[str, str] | None = None,
        client: Any = None,
        labels: Mapping[str, str] | None = None,
        network: str | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        if sim_ports < 0 or sim_ports > 99:
            raise ValueError(f"sim_ports must be between 0 and 99, got {sim_ports!r}")
        if network in ("host", "none"):
            raise ValueError(
                f"DockerRuntime(network={network!r}) is not supported: it publishes the "
                "container's ports on 127.0.0.1; use a bridge network (the default)"
            )
        self.image = image
        self.module = module
        self.boot_timeout = boot_timeout
        self.sim_ports = sim_ports
        self.env = dict(env or {})
        self.labels = dict(labels or {})
        self.network = network
        self.command = list(command) if command is not None else None
        self._client = client
        self._lock = threading.Lock()
        self._pull_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DockerRuntime({self.image!r})"

    def __call__(self, task: Task, /) -> _DockerSubstrate:
        return _DockerSubstrate(self, task)

    def client(self) -> Any:
        """The docker client (made on first use; blocking)."""
        with self._lock:
            if self._client is None:
                self._client = _client()
            return self._client

    def image_for(self, task: Task) -> str:
        image = (task.runtime_config.image if task.runtime_config else None) or self.image
        if not image:
            raise SubstrateError(
                f"{task.key}: no image to run: set the row's runtime_config.image or "
                "pass DockerRuntime(image)"
            )
        return image

    def _resolve(self, image: str) -> str | None:
        """Make sure ``image`` is on the engine (pulling it if not); the module to serve."""
        docker = _sdk()
        client = self.client()
        try:
            img = client.images.get(image)
        except docker.errors.ImageNotFound:
            with self._pull_lock:
                try:
                    img = client.images.get(image)
                except docker.errors.ImageNotFound:
                    try:
                        img = client.images.pull(image)
                    except docker.errors.DockerException as exc:
                        raise SubstrateError(
                            f"image {image!r} is not on this Docker engine and pulling it "
                            f"failed ({exc}); build it first (pytest_hud.runtime.docker."
                            "build_image, or docker build)"
                        ) from None
        if self.command is not None or self.module:
            return self.module
        config = img.attrs.get("Config") or {}
        for item in config.get("Env") or []:
            key, _, value = item.partition("=")
            if key == MODULE_ENV and value:
                return value
        module = (config.get("Labels") or {}).get(f"{LABEL}.module")
        if module:
            return str(module)
        raise SubstrateError(
            f"image {image!r} names no env module to serve: pass DockerRuntime(module=...), "
            f"or give the image ENV {MODULE_ENV}=... (build_image(module=...)) or a "
            f"'{LABEL}.module' label"
        )

    def create_kwargs(self, task: Task, image: str, module: str | None) -> dict[str, Any]:
        sims = [CONTROL_PORT + 1 + i for i in range(self.sim_ports)]
        if self.command is not None:
            argv = list(self.command)
        else:
            argv = ["python3", "-m", "pytest_hud.serve", str(module)]
            argv += ["--host", "0.0.0.0", "--port", str(CONTROL_PORT), "--sim-host", "0.0.0.0"]
            if sims:
                argv += ["--sim-ports", f"{sims[0]}-{sims[-1]}"]
        cfg = task.runtime_config
        env = {"PYTHONUNBUFFERED": "1", **self.env, **dict(cfg.env if cfg else ())}
        labels = {**self.labels, **owner_labels(), f"{LABEL}.task": task.key}
        kwargs: dict[str, Any] = {
            "image": image,
            "command": argv,
            "detach": True,
            "init": True,
            "ports": {f"{p}/tcp": ("127.0.0.1", None) for p in [CONTROL_PORT, *sims]},
            "labels": labels,
            "environment": env,
        }
        if self.network:
            kwargs["network"] = self.network
        if cfg is not None:
            if cfg.cpu:
                kwargs["nano_cpus"] = int(cfg.cpu * 1e9)
            if cfg.memory:
                kwargs["mem_limit"] = cfg.memory
            if cfg.gpu:
                count = int(cfg.gpu) if str(cfg.gpu).isdigit() else -1
                request = _sdk().types.DeviceRequest(count=count, capabilities=[["gpu"]])
                kwargs["device_requests"] = [request]
        return kwargs


def _runtime_of(container: Any, task: Task) -> Runtime | None:
    """The Runtime of a started container, once its published ports show (else None)."""
    ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
    published: dict[int, int] = {}
    for key, bindings in ports.items():
        port, _, proto = key.partition("/")
        for binding in bindings or []:
            if proto == "tcp" and binding.get("HostIp") == "127.0.0.1" and binding.get("HostPort"):
                published[int(port)] = int(binding["HostPort"])
                break
    if CONTROL_PORT not in published:
        return None
    port_map = {str(p): h for p, h in sorted(published.items()) if p != CONTROL_PORT}
    params = {"kind": "docker", "container": container.id, "host": "127.0.0.1"}
    params["port_map"] = port_map
    return Runtime(f"tcp://127.0.0.1:{published[CONTROL_PORT]}", params, task.runtime_config)


def _log_tail(container: Any, lines: int = LOG_TAIL) -> str:
    try:
        text = container.logs(tail=lines).decode(errors="replace").rstrip()
    except Exception as exc:
        return f"(no logs: {exc})"
    return text or "(no output)"


class _DockerSubstrate:
    def __init__(self, provider: DockerRuntime, task: Task) -> None:
        self.provider = provider
        self.task = task
        self.container: Any = None
        #: seconds from create to a ping reply, and to remove the container (for reports)
        self.boot_seconds: float | None = None
        self.teardown_seconds: float | None = None

    async def __aenter__(self) -> Runtime:
        provider, task = self.provider, self.task
        image = provider.image_for(task)
        client = await _blocking(provider.client)
        await _blocking(_reap_once, client)
        module = await _blocking(provider._resolve, image)
        kwargs = provider.create_kwargs(task, image, module)
        start = time.monotonic()
        try:
            create = functools.partial(client.containers.create, **kwargs)
            self.container = await _settled(create, undo=_force_remove)
            try:
                await _settled(self.container.start)
            except _sdk().errors.APIError as exc:
                raise SubstrateError(
                    f"{task.key}: container of {image!r} would not start: {exc}"
                ) from None
            runtime = await self._wait_ready(image)
        except BaseException:
            await self._remove()
            raise
        self.boot_seconds = time.monotonic() - start
        log.debug(
            "%s: container %s ready in %.2fs",
            task.key,
            runtime.params["container"][:12],
            self.boot_seconds,
        )
        return runtime

    async def _wait_ready(self, image: str) -> Runtime:
        container, task = self.container, self.task
        timeout = self.provider.boot_timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        runtime: Runtime | None = None
        last = "no reply yet"
        delay = 0.05
        what = f"{task.key}: container {container.short_id} ({image})"
        while True:
            await _blocking(container.reload)
            state = container.attrs.get("State") or {}
            if state.get("Status") in ("exited", "dead", "removing"):
                code = state.get("ExitCode")
                extra = f" ({state['Error']})" if state.get("Error") else ""
                extra += " (out of memory)" if state.get("OOMKilled") else ""
                tail = await _blocking(_log_tail, container)
                raise SubstrateError(
                    f"{what} exited with code {code}{extra} before its env server answered; "
                    f"the last lines of its log:\n{tail}"
                )
            if runtime is None:
                runtime = _runtime_of(container, task)
            remaining = deadline - loop.time()
            if runtime is not None and remaining > 0:
                try:
                    async with asyncio.timeout(min(5.0, remaining)):
                        control = await ControlClient.connect(runtime, timeout=remaining)
                        try:
                            await control.ping(timeout=remaining)
                        finally:
                            await control.close()
                    return runtime
                except (ControlError, OSError, TimeoutError) as exc:
                    # docker-proxy accepts and hangs up until the server listens
                    last = str(exc) or type(exc).__name__
            if loop.time() >= deadline:
                tail = await _blocking(_log_tail, container)
                raise SubstrateError(
                    f"{what} did not answer a control ping within {timeout} s (last attempt: "
                    f"{last}); the last lines of its log:\n{tail}"
                )
            await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
            delay = min(delay * 1.5, 0.5)

    async def _remove(self) -> None:
        container, self.container = self.container, None
        if container is None:
            return
        start = time.monotonic()
        fut = asyncio.ensure_future(_blocking(_force_remove, container))
        try:
            await asyncio.wait_for(asyncio.shield(fut), REMOVE_TIMEOUT)
        except TimeoutError:
            raise SubstrateError(
                f"{self.task.key}: container {container.short_id} was not removed within "
                f"{REMOVE_TIMEOUT} s (reap_containers() removes it once this process is gone)"
            ) from None
        self.teardown_seconds = time.monotonic() - start

    async def death(self) -> str | None:
        """How the container died (exit code, OOM, its log's tail); None while it runs."""
        container = self.container
        if container is None:
            return None
        for _ in range(5):  # the engine marks it exited a moment after its ports close
            try:
                await _blocking(container.reload)
            except Exception as exc:  # removed under us: say so rather than guess
                return f"container {container.short_id} is gone ({exc})"
            state = container.attrs.get("State") or {}
            if state.get("Status") in ("exited", "dead", "removing"):
                break
            await asyncio.sleep(0.2)
        else:
            return None
        extra = " (out of memory)" if state.get("OOMKilled") else ""
        extra += f" ({state['Error']})" if state.get("Error") else ""
        tail = await _blocking(_log_tail, container)
        return (
            f"container {container.short_id} exited with code {state.get('ExitCode')}{extra} "
            f"during the rollout; the last lines of its log:\n{tail}"
        )

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        note = None
        if isinstance(e, Exception):
            with contextlib.suppress(Exception):
                note = await self.death()
        try:
            await self._remove()
        except Exception as exc:
            if et is None:
                raise SubstrateError(
                    f"{self.task.key}: could not remove its container: {exc}"
                ) from exc
            log.warning("%s: could not remove its container: %s", self.task.key, exc)
        if note is not None:  # the rollout's own error was only the symptom
            raise SubstrateError(died_during(self.task, note, e)) from e


# -- building an image without a registry ---------------------------------------------------
def cache_dir() -> Path:
    """$PYTEST_HUD_CACHE, else $XDG_CACHE_HOME/pytest-hud, else ~/.cache/pytest-hud."""
    if os.environ.get("PYTEST_HUD_CACHE"):
        return Path(os.environ["PYTEST_HUD_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytest-hud"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _skip(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix == ".pyc"


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file() and not _skip(p.relative_to(root)))


def _hash_tree(digest: Any, root: Path, name: str) -> None:
    for path in _files(root):
        rel = path.name if root.is_file() else path.relative_to(root).as_posix()
        digest.update(f"{name}/{rel}\0{os.access(path, os.X_OK)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())


def _project() -> tuple[Path, list[Path]]:
    """Where this project's source is, and the files pip needs to build it.

    A source checkout (editable install): its pyproject and package. An installed
    copy: just the package folder (copied as is).
    """
    package = Path(__file__).resolve().parent.parent
    root = package.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "pytest-hud"' in pyproject.read_text():
        extra = [p for p in root.iterdir() if p.name in ("README.md", "setup.cfg", "setup.py")]
        extra += [p for p in root.iterdir() if p.name.startswith("LICENSE")]
        return root, [pyproject, package, *sorted(extra)]
    return package.parent, [package]


def _requirements(packages: Sequence[str] | None) -> list[str]:
    """The runtime deps pinned to this environment's versions, plus ``packages``."""
    reqs = []
    for name in RUNTIME_DEPS:
        try:
            reqs.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            reqs.append(name)
    return reqs + [str(p) for p in packages or ()]


def _pip(args: list[str], what: str) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    proc = subprocess.run(cmd + args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).strip().splitlines()
        raise RuntimeError(f"pip install of {what} failed:\n" + "\n".join(out[-30:]))


def _deps_folder(reqs: list[str]) -> Path:
    """A ``pip install --target`` folder of ``reqs``, cached by the requirement set."""
    key_data = [f"{sys.version_info[0]}.{sys.version_info[1]}", platform.machine(), sorted(reqs)]
    key = hashlib.sha256(json.dumps(key_data).encode()).hexdigest()[:16]
    folder = cache_dir() / "site" / key
    if (folder / ".complete").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder.parent))
    try:
        _pip(["--target", str(tmp), *reqs], "the image's dependencies")
        (tmp / "requirements.txt").write_text("\n".join(reqs) + "\n")
        (tmp / ".complete").write_text("")
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _install_project(root: Path, parts: list[Path], site: Path) -> None:
    if not (root / "pyproject.toml").is_file():
        shutil.copytree(root / "pytest_hud", site / "pytest_hud", ignore=_ignore_caches)
        return
    with tempfile.TemporaryDirectory(prefix="pytest-hud-src.") as src:
        for part in parts:  # a copy, so the build never writes into the checkout
            if part.is_dir():
                shutil.copytree(part, Path(src) / part.name, ignore=_ignore_caches)
            else:
                shutil.copy2(part, Path(src) / part.name)
        _pip(["--target", str(site), "--no-deps", src], "pytest-hud")


def _ignore_caches(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__" or n.endswith(".pyc")]


def _extra(extra_files: Any) -> list[tuple[str, Path]]:
    """``[path, ...]`` (each to /app/<its name>) or ``{dest: path}`` (to /app/<dest>)."""
    if not extra_files:
        return []
    if isinstance(extra_files, str | Path):
        extra_files = [extra_files]
    items = (
        list(extra_files.items())
        if isinstance(extra_files, Mapping)
        else [(Path(p).name, p) for p in extra_files]
    )
    out = []
    for dest, src in items:
        path = Path(src).resolve()
        if not path.exists():
            raise FileNotFoundError(f"build_image: extra file {src} does not exist")
        dest = str(dest).strip("/")
        if not dest or ".." in Path(dest).parts:
            raise ValueError(f"build_image: bad destination {dest!r} for {src}")
        out.append((dest, path))
    return out


def _dockerfile(base: str, module: str | None) -> str:
    lines = [
        f"FROM {base}",
        "COPY deps /opt/site",
        "COPY site /opt/site",
        "COPY app /app",
        "ENV PYTHONPATH=/opt/site:/app PYTHONUNBUFFERED=1",
        "WORKDIR /app",
    ]
    if module:
        lines.append(f"ENV {MODULE_ENV}={json.dumps(str(module))}")
    return "\n".join(lines) + "\n"


def _tar_filter(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _add_tree(tar: tarfile.TarFile, src: Path, arcname: str, *, keep_caches: bool) -> None:
    if src.is_file():
        tar.add(src, arcname, filter=_tar_filter)
        return
    tar.add(src, arcname, recursive=False, filter=_tar_filter)
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if not keep_caches and _skip(rel):
            continue
        tar.add(path, f"{arcname}/{rel.as_posix()}", recursive=False, filter=_tar_filter)


def _build(client: Any, tag: str, labels: dict[str, str], **kwargs: Any) -> Any:
    docker = _sdk()
    try:
        image, _ = client.images.build(tag=tag, rm=True, forcerm=True, labels=labels, **kwargs)
    except docker.errors.BuildError as exc:
        out = "".join(str(c.get("stream") or c.get("error") or "") for c in exc.build_log)
        tail = "\n".join(out.strip().splitlines()[-30:])
        raise RuntimeError(f"docker build of {tag} failed: {exc.msg}\n{tail}") from None
    return image


_SMOKE = (
    "import sys; v = '%d.%d' % sys.version_info[:2]; "
    "assert v == {want!r}, 'the image runs Python ' + v + ' but its packages were installed "
    "for {want} (pick a base image with Python {want})'; "
    "import pytest_hud.serve, numpy, gymnasium, msgpack, websockets"
)


def build_image(
    tag: str,
    *,
    base: str = DEFAULT_BASE,
    module: str | None = None,
    extra_files: Any = None,
    packages: Sequence[str] | None = None,
    dockerfile: str | Path | None = None,
    client: Any = None,
) -> str:
    """Build ``tag``: ``base`` plus this project, its runtime deps and ``packages``; the tag.

    No registry is involved: packages are installed on this host with
    ``pip install --target`` (this interpreter's pip, so the base image needs the same
    Python minor version) and copied in. ``extra_files`` (paths, or ``{dest: path}``)
    land in /app, the working directory; ``module`` (e.g. ``envs/pendulum.py``) becomes
    ``$PYTEST_HUD_MODULE``. Nothing is rebuilt while the tag carries the same content
    hash; the dependency folder is cached under :func:`cache_dir` by requirement set.
    ``dockerfile``: build that file instead (its folder is the context).
    """
    docker = _sdk()
    client = _client(client)
    if dockerfile is not None:
        path = Path(dockerfile).resolve()
        labels = {f"{LABEL}.module": str(module)} if module else {}
        _build(client, tag, labels, path=str(path.parent), dockerfile=path.name)
        return tag
    with _file_lock(cache_dir() / "build.lock"):  # one build at a time (xdist workers)
        try:
            base_id = client.images.get(base).id
        except docker.errors.ImageNotFound:
            raise RuntimeError(
                f"base image {base!r} is not on this Docker engine; build it with "
                ".ci/make-base-image (a Python of this host's minor version, no registry)"
            ) from None
        reqs = _requirements(packages)
        root, parts = _project()
        extra = _extra(extra_files)
        text = _dockerfile(base, module)
        digest = hashlib.sha256()
        digest.update(json.dumps([text, base_id, reqs, sys.version_info[:2]]).encode())
        for part in parts:
            _hash_tree(digest, part, f"project/{part.name}")
        for dest, src in extra:
            _hash_tree(digest, src, f"app/{dest}")
        content = digest.hexdigest()[:32]
        try:
            old = client.images.get(tag)
        except docker.errors.ImageNotFound:
            old = None
        if old is not None and (old.labels or {}).get(f"{LABEL}.content") == content:
            log.info("%s is up to date", tag)
            return tag
        start = time.monotonic()
        deps = _deps_folder(reqs)
        with tempfile.TemporaryDirectory(prefix="pytest-hud-build.") as tmp:
            site = Path(tmp) / "site"
            _install_project(root, parts, site)
            app = Path(tmp) / "app"
            app.mkdir()
            (Path(tmp) / "Dockerfile").write_text(text)
            context = Path(tmp) / "context.tar"
            with tarfile.open(context, "w") as tar:
                tar.add(Path(tmp) / "Dockerfile", "Dockerfile", filter=_tar_filter)
                _add_tree(tar, deps, "deps", keep_caches=True)
                _add_tree(tar, site, "site", keep_caches=True)
                _add_tree(tar, app, "app", keep_caches=False)
                for dest, src in extra:
                    _add_tree(tar, src, f"app/{dest}", keep_caches=False)
            with open(context, "rb") as fileobj:
                labels = {f"{LABEL}.content": content}
                image = _build(client, tag, labels, fileobj=fileobj, custom_context=True)
        want = f"{sys.version_info[0]}.{sys.version_info[1]}"
        try:
            client.containers.run(
                tag,
                ["python3", "-c", _SMOKE.format(want=want)],
                remove=True,
                stderr=True,
                labels=owner_labels(),
            )
        except docker.errors.ContainerError as exc:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(image.id, force=True)
            err = exc.stderr.decode(errors="replace") if exc.stderr else str(exc)
            raise RuntimeError(f"{tag} was built but cannot import pytest-hud:\n{err}") from None
        if old is not None and old.id != image.id:
            with contextlib.suppress(docker.errors.APIError):  # still in use: leave it
                client.images.remove(old.id)
        log.info("built %s in %.1fs", tag, time.monotonic() - start)
        return tag
