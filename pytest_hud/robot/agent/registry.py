"""The agent registry behind ``--hud-agent=NAME`` (the built-ins: docs/guides/agents.md).

Other packages (and pytest-hud's own interop) register under the ``pytest_hud.agents``
entry-point group: an agent or a factory under its whole spec (``metaworld-expert``), or an
:class:`AgentKind` under a prefix that takes an argument (``vla-eval:ws://HOST:PORT``).
"""

from __future__ import annotations

import glob
import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

from pytest_hud.errors import AgentSpecError
from pytest_hud.plumbing.auth import kept_token
from pytest_hud.plumbing.loader import registered

if TYPE_CHECKING:  # the agent stack loads with the first agent built, not with the plugin
    from pytest_hud.robot.agent.agent import RobotAgent

__all__ = [
    "CHECKPOINT_TEMPLATE",
    "DEFAULT_AGENT",
    "AgentKind",
    "AgentSpec",
    "AgentSpecError",
    "available_agents",
    "checkpoint_step",
    "load_agent",
    "preflight",
]

ENTRY_POINT_GROUP = "pytest_hud.agents"
_STEP = re.compile(r"(?:^|/)checkpoints/(\d+)(?:/|$)")
_GLOB = re.compile(r"[*?\[]")


def checkpoint_step(path: str) -> int | None:
    """The training step of a ``.../checkpoints/NNNNNN/...`` path (None for ``last`` or none)."""
    found = _STEP.search(path.replace("\\", "/"))
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class AgentSpec:
    """One ``--hud-agent`` value, read once: its kind (before the first ``:``) and argument.
    Labels, ledgers and reports show ``text``; everything else asks this."""

    text: str

    @classmethod
    def parse(cls, text: str, what: str = "agent") -> AgentSpec:
        """The spec ``text`` names; AgentSpecError listing the valid forms for none (``what``
        names where it came from, e.g. ``--hud-agent``)."""
        spec = cls(text.strip())
        if not spec.known:
            forms = ", ".join(available_agents())
            raise AgentSpecError(f"unknown {what} {spec.text!r}; valid forms: {forms}")
        return spec

    @property
    def kind(self) -> str:
        return self.text.partition(":")[0]

    @property
    def arg(self) -> str | None:
        return self.text.partition(":")[2] or None

    @property
    def known(self) -> bool:
        """A built-in, a registered name or kind, or a MODULE:FACTORY / file.py:FACTORY."""
        return self.kind in BUILTINS or self.text in _entry_points() or ":" in self.text

    @property
    def checkpoint(self) -> str | None:
        """The checkpoint a ``lerobot:PATH`` spec loads (None for other kinds)."""
        return self.arg if self.kind == "lerobot" else None

    @property
    def step(self) -> int | None:
        """The training step of a ``lerobot:.../checkpoints/NNNNNN/...`` checkpoint."""
        return checkpoint_step(self.checkpoint or "")

    @property
    def model_backed(self) -> bool:
        """Whether the spec builds a model in this process (a checkpoint, pi05, a
        ``MODULE:FACTORY``): what one process per device may serve to the others, where
        ``zero``, ``random``, scripted experts and ``openpi:`` clients cost nothing."""
        entry = _kind_of(self)
        if entry is not None:
            return entry.model
        return self.text not in _entry_points() and ":" in self.text  # MODULE:FACTORY

    @property
    def checked_in_controller(self) -> bool:
        """Whether the xdist controller builds this agent to check it against the envs
        (``--hud-preflight``) before the workers build their own."""
        entry = _kind_of(self)
        return entry is not None and entry.checked_in_controller and self.replicas is None

    def expand(self) -> list[AgentSpec]:
        """A ``lerobot:GLOB`` as one spec per matched checkpoint folder, by training step;
        else ``[self]``. AgentSpecError when the glob matches none."""
        path = self.checkpoint
        if path is None or not _GLOB.search(path):
            return [self]
        found: dict[str, str] = {}  # real path -> the match naming it (a step beats "last")
        for match in sorted(glob.glob(path)):
            if not os.path.isdir(match):
                continue
            real = os.path.realpath(match)
            if real not in found or checkpoint_step(found[real]) is None:
                found[real] = match
        if not found:
            raise AgentSpecError(
                f"{self.text}: expected the glob to match checkpoint folders, got none; "
                "fix: point it at a training run's checkpoints, e.g. "
                "lerobot:outputs/train/act/checkpoints/*/pretrained_model"
            )

        def order(match: str) -> tuple[int, int, str]:
            step = checkpoint_step(match)
            return (step is None, step or 0, match)

        return [AgentSpec(f"lerobot:{m}") for m in sorted(found.values(), key=order)]

    @property
    def replicas(self) -> str | None:
        """The replica group an ``openpi:ray:NAME`` spec names (on a Ray cluster)."""
        if self.kind != "openpi" or not (self.arg or "").startswith("ray:"):
            return None
        return (self.arg or "").removeprefix("ray:")

    def seeded(self, seed: int | None) -> AgentSpec:
        """``random`` made reproducible by the session's seed (``random:SEED``)."""
        if self.text == "random" and seed is not None:
            return AgentSpec(f"random:{seed}")
        return self


#: the agent of a session that names none
DEFAULT_AGENT = AgentSpec("random")
#: a checkpoint folder's spec, ``{path}`` filled in (``python -m pytest_hud watch``'s default)
CHECKPOINT_TEMPLATE = "lerobot:{path}"


@dataclass(frozen=True)
class AgentKind:
    """Specs ``NAME[:ARG]`` of one kind (a built-in, or one registered under ``NAME`` in the
    entry-point group): ``load(arg)`` builds the agent, ``preflight(arg)`` checks what it can
    without building it (the xdist controller's check), ``form`` shows the spelling in
    errors; ``model``: it builds a model worth serving once per device; ``checked_in_controller``:
    ``--hud-preflight`` builds it on the xdist controller to check it against the envs."""

    load: Callable[[str | None], Any]
    form: str
    preflight: Callable[[str | None], None] | None = None
    model: bool = False
    checked_in_controller: bool = False


def _zero(arg: str | None = None) -> RobotAgent:
    from pytest_hud.robot.agent.agent import RobotAgent
    from pytest_hud.robot.agent.model import ZeroModel

    return RobotAgent(ZeroModel(), name="zero")


def _random(arg: str | None = None) -> RobotAgent:
    from pytest_hud.robot.agent.agent import RobotAgent
    from pytest_hud.robot.agent.model import RandomModel

    seed = int(arg) if arg else None
    return RobotAgent(RandomModel(seed=seed), name="random" if arg is None else f"random:{arg}")


def _lerobot(arg: str | None = None) -> RobotAgent:
    if not arg:
        raise AgentSpecError("lerobot: needs a checkpoint, e.g. --hud-agent=lerobot:path/to/ckpt")
    from pytest_hud.robot.agent.lerobot import lerobot_agent

    return lerobot_agent(arg)


def _check_lerobot(arg: str | None) -> None:
    if not arg:
        raise AgentSpecError("lerobot: needs a checkpoint, e.g. --hud-agent=lerobot:path")
    from pytest_hud.robot.agent.lerobot import check_checkpoint

    check_checkpoint(arg)


def _pi05(arg: str | None = None) -> RobotAgent:
    from pytest_hud.robot.agent.lerobot import pi05_agent

    return pi05_agent(arg)


def _check_pi05(arg: str | None) -> None:
    from pytest_hud.robot.agent.lerobot import check_checkpoint, pi05_source

    if arg:
        check_checkpoint(arg)
    else:  # its own message, naming the pi05:/path form
        pi05_source()


def _openpi(arg: str | None = None) -> RobotAgent:
    host, _, port = (arg or "").rpartition(":")
    if not host or not port.isdigit():
        raise AgentSpecError(
            f"openpi: needs HOST:PORT, e.g. --hud-agent=openpi:127.0.0.1:8000, got {arg!r}"
        )
    from pytest_hud.robot.agent.agent import RobotAgent
    from pytest_hud.robot.agent.remote import RemoteModel

    # a policy server started with --token wants it: from the environment, else the file
    # such a server on this host keeps it in, never the spec (shown in reports and ledgers)
    token = os.environ.get("PYTEST_HUD_POLICY_TOKEN") or kept_token(host, int(port), "policy")
    model = RemoteModel(f"ws://{host}:{port}", api_key=token)
    return RobotAgent(model, name=f"openpi:{host}:{port}")


#: The built-in kinds (registered ones come through the entry-point group).
BUILTINS: dict[str, AgentKind] = {
    "zero": AgentKind(_zero, "zero"),
    "random": AgentKind(_random, "random[:SEED]"),
    "lerobot": AgentKind(
        _lerobot,
        "lerobot:PATH_OR_REPO",
        _check_lerobot,
        model=True,
        checked_in_controller=True,
    ),
    "pi05": AgentKind(_pi05, "pi05", _check_pi05, model=True, checked_in_controller=True),
    "openpi": AgentKind(_openpi, "openpi:HOST:PORT", checked_in_controller=True),
}


def _kind_of(spec: AgentSpec) -> AgentKind | None:
    """The kind ``spec`` is of: a built-in, or one registered under its prefix (a whole-spec
    entry point, ``metaworld-expert``, is an agent, not a kind)."""
    if spec.kind in BUILTINS:
        return BUILTINS[spec.kind]
    return _kind(spec.kind)


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return registered(ENTRY_POINT_GROUP)


def _kind(name: str) -> AgentKind | None:
    """The AgentKind registered under ``name``, if one is (loading only that entry point)."""
    ep = _entry_points().get(name)
    if ep is None:
        return None
    try:
        found = ep.load()
    except ImportError:  # its package is absent: the kind cannot be used here
        return None
    return found if isinstance(found, AgentKind) else None


def available_agents() -> list[str]:
    """Names ``--hud-agent`` accepts (forms with arguments shown as such)."""
    forms = [
        *(kind.form for kind in BUILTINS.values()),
        "openpi:ray:NAME",
        "MODULE:FACTORY",
        "path/to/file.py:FACTORY",
    ]
    registered = [(kind.form if (kind := _kind(name)) else name) for name in _entry_points()]
    return forms + sorted(registered)


def _as_agent(obj: Any, spec: str) -> RobotAgent:
    from pytest_hud.robot.agent.agent import RobotAgent

    is_agent = isinstance(obj, RobotAgent) or inspect.iscoroutinefunction(obj)
    if isinstance(obj, type) or (callable(obj) and not is_agent):
        obj = obj()  # a class or a factory function
    if not callable(obj):
        raise AgentSpecError(f"{spec!r} gave {obj!r}, which is not an agent (a callable on a Run)")
    return obj


def load_agent(spec: str | AgentSpec, *, cluster: str | None = None) -> Any:
    """Resolve an agent spec to an agent (anything awaitable on a Run); ``cluster``: the Ray
    cluster ``openpi:ray:NAME`` looks its replicas up on (else $RAY_ADDRESS, or the one
    this process joined)."""
    parsed = spec if isinstance(spec, AgentSpec) else AgentSpec(spec.strip())
    if parsed.replicas is not None:
        return _replicas(parsed, cluster)
    spec, name, arg = parsed.text, parsed.kind, parsed.arg or ""
    if name in BUILTINS:
        return BUILTINS[name].load(arg or None)
    eps = _entry_points()
    if spec in eps:
        return _as_agent(eps[spec].load(), spec)
    kind = _kind(name) if arg else None
    if kind is not None:
        return kind.load(arg)
    if ":" in spec:
        from pytest_hud.plumbing.loader import load_object

        try:
            obj = load_object(spec)
        except (ImportError, AttributeError, FileNotFoundError, ValueError) as exc:
            raise AgentSpecError(
                f"cannot load agent {spec!r}: {exc}. Valid forms: {', '.join(available_agents())}"
            ) from None
        from pytest_hud.robot.agent.agent import RobotAgent

        agent = _as_agent(obj, spec)
        if isinstance(agent, RobotAgent) and agent.name == "agent":
            agent.name = spec
        return agent
    raise AgentSpecError(f"unknown agent {spec!r}. Valid forms: {', '.join(available_agents())}")


def _replicas(spec: AgentSpec, cluster: str | None) -> object:
    """``openpi:ray:NAME``: the agent of the named policy replicas on the Ray cluster."""
    if not spec.replicas:
        raise AgentSpecError(f"{spec.text}: expected openpi:ray:NAME, got no NAME")
    from pytest_hud.robot.agent.replicas import replica_agent

    return replica_agent(spec.replicas, cluster, agent_name=spec.text)


def preflight(spec: AgentSpec) -> None:
    """load_agent's checks that build nothing (a checkpoint's folder or hub reachability,
    a factory's module and name), for a process that will not run the agent itself:
    the xdist controller, so a bad --hud-agent is one usage error before workers start."""
    entry = _kind_of(spec)
    if entry is not None:
        if entry.preflight is not None:
            entry.preflight(spec.arg)
    elif spec.text not in _entry_points() and spec.arg is not None:
        from pytest_hud.plumbing.loader import load_object

        try:
            load_object(spec.text)
        except (ImportError, AttributeError, FileNotFoundError, ValueError) as exc:
            raise AgentSpecError(f"cannot load agent {spec.text!r}: {exc}") from None
