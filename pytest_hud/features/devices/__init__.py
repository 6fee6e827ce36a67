"""Devices: where the session's models run, and whether its containers get GPUs.

Under ``pytest -n K`` (K > 1) with a model-backed agent (a checkpoint, pi05, a
``MODULE:FACTORY``), the default placement is ``shared``: as the workers start, the
controller starts one model server per device in use (:mod:`.servers`; the factory is called
there, once per device; they load while the workers start, and serve before any item is
scheduled), and every worker's agent is the same agent's shell around a remote
model on its device's server, so the requests of every worker's rollouts batch in one
forward. ``--hud-model-placement=worker`` keeps a copy in each worker instead. Cheap agents
(zero, random, scripted experts) always run in the workers. ``--hud-devices`` names the
devices (``auto``: every visible GPU, else the CPU); worker ``gwN`` uses device ``N mod n``,
for its server or its own copy. ``--hud-docker-gpus`` gives docker containers GPUs (for sims
that render on one, ``MUJOCO_GL=egl``).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_hud._plugin.feature_api import (
    FeatureSettings,
    Hud,
    WorkerNode,
    handed,
    option,
    worker_node_id,
)
from pytest_hud.features.devices.figures import html_section, terminal_lines
from pytest_hud.features.devices.placement import (
    AUTO,
    PLACEMENTS,
    check_devices,
    device_of,
    parse_devices,
    resolve,
    visible_to,
)
from pytest_hud.features.devices.servers import (
    ModelServer,
    Served,
    ServerError,
    announced,
    death_note,
)
from pytest_hud.plumbing.private_dir import private_dir
from pytest_hud.plumbing.process import set_env
from pytest_hud.robot.agent.device import DEVICE_ENV

if TYPE_CHECKING:
    from pytest_hud.robot.agent.registry import AgentSpec

__all__ = ["KEY", "REQUESTS", "DevicesPlugin", "Settings", "enable"]

#: what the controller hands each worker: its device and the servers it uses
KEY = "hud_devices"
#: the workeroutput key of a worker's requests to each server (``spec\tcount`` lines)
REQUESTS = "pytest_hud_model_requests"
#: seconds a model server may take to load its model and serve
LOAD_TIMEOUT = 900.0


def _placement(value: str) -> str | None:
    return None if value in PLACEMENTS else f"is shared or worker, got {value!r}"


def _gpus(value: str) -> str | None:
    ids = value.removeprefix("device=").split(",")
    ok = value == "all" or value.isdigit() or (value.startswith("device=") and all(ids))
    return None if ok else f"is all, a count or device=0,1 (as docker run --gpus), got {value!r}"


class Settings(FeatureSettings):
    devices: tuple[str, ...] = option(
        "--hud-devices",
        "the devices models run on: auto (every GPU this process sees, honouring "
        "CUDA_VISIBLE_DEVICES, else the CPU) or a list such as cuda:0,cuda:1 (or cpu); "
        "worker gwN uses device N mod n (default: auto)",
        default=(AUTO,),
        parse=parse_devices,
        metavar="DEVICES",
    )
    placement: str | None = option(
        "--hud-model-placement",
        "where a model-backed agent's model runs under -n K: shared (one model server per "
        "device, started by the controller; every worker's rollouts batch in its forwards; "
        "the default) or worker (a copy in each worker)",
        check=_placement,
        metavar="WHERE",
    )
    docker_gpus: str | None = option(
        "--hud-docker-gpus",
        "give every container of --hud-runtime=docker these GPUs (all, a count, or "
        "device=0,1, as docker run --gpus): for sims that render on a GPU (MUJOCO_GL=egl); "
        "a row's runtime_config gpu wins (default: none)",
        check=_gpus,
        metavar="GPUS",
    )
    #: in a worker: its device and the servers it uses (from the controller)
    given: dict[str, Any] | None = handed(KEY)


class DevicesPlugin:
    """The feature in one process: on the controller, the model servers it owns, what each
    worker is handed, and their figures; in a worker, the served agents."""

    def __init__(self, hud: Hud, restore: list[Callable[[], None]]) -> None:
        self.hud = hud
        self.restore = restore
        #: the controller's servers, by spec, one per device in use
        self.servers: dict[str, list[ModelServer]] = {}
        #: the devices workers are spread over (controller), and how
        self.devices: tuple[str, ...] = ()
        self.placement = "process"
        self.fallback: str | None = None
        #: what this worker uses: its servers by spec (the folders of those it has not
        #: read yet)
        self.mine: dict[str, Served] = {}
        self.folders: dict[str, str] = {}
        #: every device named, and the workers (controller)
        self.all_devices: tuple[str, ...] = ()
        self.workers = 0
        #: servers whose agent could not be served apart (stopped at the end)
        self.unserved: list[ModelServer] = []
        self._waiting = False
        self.agents: dict[str, Any] = {}
        self.requests: dict[str, dict[str, int]] = {}  # spec -> worker -> requests
        self._block: dict[str, object] | None = None
        self._closed = False

    # -- the controller ---------------------------------------------------------------------
    def launch(self, specs: list[AgentSpec], workers: int) -> None:
        """One server per spec and device in use, started together; they load their models
        while the workers start (:meth:`ready` waits for them before any item runs)."""
        folder = Path(tempfile.mkdtemp(prefix="models-", dir=private_dir("models")))
        connections = max(64, 4 * workers * self.hud.options.concurrency)
        self.workers = workers
        for spec in specs:
            self.servers[spec.text] = [
                ModelServer(
                    spec.text,
                    device,
                    folder / f"{len(self.servers)}-{i}",
                    {DEVICE_ENV: _local(device), **visible_to(device)},
                    connections=connections,
                )
                for i, device in enumerate(self.devices)
            ]
        for group in self.servers.values():
            for server in group:
                server.launch(LOAD_TIMEOUT)
        self._waiting = True

    def ready(self) -> None:
        """Wait for every server to serve (bounded; once): one usage error for a server
        that would not start; a spec whose agent cannot be served apart runs in the workers
        instead, said once."""
        if not self._waiting:
            return
        self._waiting = False
        everyone = [s for group in self.servers.values() for s in group]
        errors: list[str] = []
        for server in everyone:  # they started together: the waits overlap
            try:
                server.wait()
            except ServerError as exc:
                errors.append(f"--hud-agent={server.spec}: {exc}")
        if errors:
            self.close()
            raise pytest.UsageError(errors[0])
        for text, group in list(self.servers.items()):
            why = next((s.info.get("why") for s in group if not s.info.get("servable")), None)
            if why is not None:  # its servers ended by themselves; their folders say why
                self.unserved += self.servers.pop(text)
                self.fallback = f"--hud-agent={text} runs in each worker: {why}"
                _say(f"{self.fallback}; --hud-model-placement=worker says so at once")
        for group in self.servers.values():
            where = ", ".join(f"{s.device} (pid {s.info['pid']})" for s in group)
            _say(
                f"one model of --hud-agent={group[0].spec} per device, shared by the "
                f"{self.workers} workers: {where}; stopped at the end "
                "(--hud-model-placement=worker: a copy per worker)"
            )
        # the controller's own checks use the first device's server
        self.mine = {spec: group[0].served for spec, group in self.servers.items()}
        if not self.servers:  # none could be served apart: each worker holds a copy
            self.placement, self.devices = "worker", self.all_devices

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: WorkerNode) -> None:
        """Hand a worker about to start its device and the folders of that device's servers
        (each announces itself there: the worker starts while the models load)."""
        worker = worker_node_id(node)
        device = device_of(worker, self.devices)
        servers = [
            {"spec": spec, "folder": str(group[self.devices.index(device) % len(group)].folder)}
            for spec, group in self.servers.items()
        ]
        Hud.to_worker(node, KEY, {"device": device, "servers": servers})

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: WorkerNode, ids: list[str]) -> None:
        """The models are loaded before the first item is scheduled (a server that would not
        start is one usage error here, the workers torn down)."""
        self.ready()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: WorkerNode) -> None:
        """A worker finished: keep its request counts."""
        worker = worker_node_id(node)
        for line in self.hud.from_worker(node, REQUESTS):
            spec, _, count = line.rpartition("\t")
            if spec and count.isdigit():
                per = self.requests.setdefault(spec, {})
                per[worker] = per.get(worker, 0) + int(count)

    def block(self) -> dict[str, object]:
        """The results' ``devices`` block (the servers' figures read once, at the end)."""
        if self._block is None:
            servers = []
            for spec, group in self.servers.items():
                for server in group:
                    entry: dict[str, object] = {
                        "spec": spec,
                        "device": server.device,
                        "pid": server.info.get("pid"),
                        "model": server.info.get("model"),
                        **(server.stats() or {}),
                    }
                    if server.death is not None:
                        entry["died"] = server.death
                    entry["requests_per_worker"] = {
                        w: n
                        for w, n in self.requests.get(spec, {}).items()
                        if device_of(w, self.devices) == server.device
                    }
                    servers.append(entry)
            self._block = {
                "placement": self.placement,
                "devices": list(self.devices),
                "servers": servers,
            }
            if self.fallback:
                self._block["fallback"] = self.fallback
        return self._block

    @pytest.hookimpl
    def pytest_hud_results_meta(self) -> dict[str, object]:
        return {} if self.hud.is_worker else {"devices": self.block()}

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.hud.is_worker or self.placement == "process":
            return
        block = self.block()
        for line in terminal_lines(block):
            terminalreporter.write_line(line, red="DIED:" in line)

    @pytest.hookimpl
    def pytest_hud_html_sections(self) -> list[str]:
        if self.hud.is_worker or self.placement == "process":
            return []
        return [html_section(self.block())]

    # -- a worker (and the controller's own checks) -----------------------------------------
    @pytest.hookimpl
    def pytest_hud_agent(self, spec: str) -> object | None:
        """The served agent of ``spec`` (its shell around this worker's device's server), or
        None where ``spec`` is not served."""
        if not self.hud.is_worker:
            self.ready()
        served = self.mine.get(spec)
        if served is None and spec in self.folders:
            served = _read(spec, self.folders.pop(spec))
            if served is not None:
                self.mine[spec] = served
        if served is None:
            return None
        if spec not in self.agents:
            self.agents[spec] = _served_agent(served)
        return self.agents[spec]

    @pytest.hookimpl  # after the session's own (tryfirst), which closes the rollout loop
    def pytest_sessionfinish(self) -> None:
        """In a worker: send the controller each served agent's request count."""
        if self.hud.is_worker and self.agents:
            lines = [f"{spec}\t{agent.model.requests}" for spec, agent in self.agents.items()]
            self.hud.to_controller(REQUESTS, lines)

    def close(self) -> None:
        """Stop the servers (together, bounded) and give the environment back."""
        if self._closed:
            return
        self._closed = True
        everyone = [s for group in self.servers.values() for s in group] + self.unserved
        threads = [threading.Thread(target=s.stop, daemon=True) for s in everyone]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        for folder in {s.folder.parent for s in everyone}:
            with contextlib.suppress(OSError):
                folder.rmdir()
        for undo in reversed(self.restore):
            undo()


def _served_agent(served: Served) -> object:
    """``served.spec``'s agent in this process: its shell around a model on the server."""
    from pytest_hud.robot.agent.model_server import session_key
    from pytest_hud.robot.agent.shell import ModelFacts, ServedModel, rebuild

    def model(facts: ModelFacts) -> ServedModel:
        return ServedModel(served.url, facts, api_key=session_key(), why=_why(served))

    return rebuild(base64.b64decode(served.shell), model)


def _read(spec: str, folder: str) -> Served | None:
    """The server of ``spec`` whose folder this is, as its announcement says; None when it
    serves nothing (its agent cannot be served apart, or it did not start: the controller
    says why and this worker builds the agent itself)."""
    found = announced(folder, LOAD_TIMEOUT + 60)
    if not found.get("servable") or "url" not in found:
        return None
    return Served.of(spec, folder, found)


def _why(served: Served) -> Callable[[], Any]:
    """What became of ``served``'s server, asked by a rollout whose request failed: its
    death note (waiting a few seconds for the controller to write it once the process is
    gone), or None while it runs."""
    import asyncio

    async def why() -> str | None:
        # A killed process's sockets close while it still runs its exit: give it a few
        # seconds to be gone before calling it alive, then the controller time to write.
        alive_for = 0
        for _ in range(100):
            note = death_note(served.folder)
            if note is not None:
                return note
            if _alive(served.pid):
                alive_for += 1
                if alive_for > 30:
                    return None
            await asyncio.sleep(0.1)
        return (
            f"the session's model server of --hud-agent={served.spec} on {served.device} "
            f"(pid {served.pid}) is gone; the rollouts it served are errors; fix: read the "
            "session's output, or run with --hud-model-placement=worker"
        )

    return why


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _local(device: str) -> str:
    """The name a process seeing ``device``'s GPU alone gives it (``cuda:0``)."""
    return "cuda:0" if device.startswith("cuda:") else device


def _workers(hud: Hud) -> int:
    """The xdist workers this controller starts (0: no xdist)."""
    if hud.is_worker or not hud.distributed:
        return 0
    return len(hud.config.getoption("tx", None) or [])


def _say(line: str) -> None:
    print(f"hud: {line}", file=sys.stderr, flush=True)


def enable(settings: Settings, hud: Hud) -> DevicesPlugin:
    """The feature's plugin (in every run: it places the process's models on a device)."""
    restore: list[Callable[[], None]] = []
    if settings.docker_gpus is not None:
        from pytest_hud.runtime.docker.container import GPUS_ENV

        restore.append(set_env(GPUS_ENV, settings.docker_gpus))
    plugin = DevicesPlugin(hud, restore)
    if hud.is_worker:
        given = settings.given or {}
        if given.get("device"):
            restore.append(set_env(DEVICE_ENV, str(given["device"])))
        for data in given.get("servers") or []:
            plugin.folders[str(data["spec"])] = str(data["folder"])
        return plugin
    devices = resolve(settings.devices)
    problem = check_devices(devices)
    if problem is not None:
        raise pytest.UsageError(f"--hud-devices {problem}")
    restore.append(set_env(DEVICE_ENV, devices[0]))  # this process's own models
    plugin.devices = devices[:1]
    workers = _workers(hud)
    if workers < 1:
        return plugin
    specs = [s for s in hud.options.agents if s.model_backed]
    shared = settings.placement != "worker" and workers > 1 and hud.options.boots_here
    plugin.placement = "shared" if shared and specs else "worker"
    plugin.devices = devices[:workers] if plugin.placement == "shared" else devices
    plugin.all_devices = devices
    if plugin.placement == "shared":
        atexit.register(plugin.close)  # also when unconfigure never runs
        plugin.launch(specs, workers)
    return plugin
