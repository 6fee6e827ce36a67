"""Environment: what an env module declares (templates, capabilities, init/shutdown hooks, and
``requires=`` / ``apt=`` for auto-built images) and what an env server serves.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pytest_hud.errors import EnvError, TaskError
from pytest_hud.plumbing.jsonvalue import JSONValue
from pytest_hud.plumbing.loader import registered
from pytest_hud.robot.contract import Contract
from pytest_hud.robot.sim.endpoint import RobotEndpoint, serve_inline
from pytest_hud.runtime.task import Task, declare

__all__ = ["SIM_KINDS", "EnvError", "Environment", "Template", "TemplateFn", "sim_kind"]

#: The entry-point group of sim kinds (``env.lerobot(...)``, ``env.vla_eval(...)``): the
#: packages that serve them register here, so the runtime imports none of them.
SIM_KINDS = "pytest_hud.sims"

#: A template's function: an async generator that yields the prompt and the robot's bindings,
#: then the grade (the env server sends it nothing).
TemplateFn = Callable[..., AsyncGenerator[object, None]]
#: A capability an environment publishes: a robot endpoint (started with the env) or a
#: manifest entry of its own.
C = TypeVar("C", bound="RobotEndpoint | Mapping[str, JSONValue]")


def sim_kind(name: str) -> Callable[..., Any]:
    """The factory registered for sim kind ``name``; EnvError naming the fix if none is."""
    found = registered(SIM_KINDS)
    if name not in found:
        raise EnvError(
            f"no {name!r} sim kind is registered: expected an entry point {name!r} in group "
            f"{SIM_KINDS!r}, got {sorted(found) or 'none'}; fix: reinstall pytest-hud "
            "(pip install -e . in a checkout), whose metadata registers it"
        )
    factory: Callable[..., Any] = found[name].load()
    return factory


class Template:
    """A task template: an async generator function bound to an Environment."""

    def __init__(self, env: Environment, fn: TemplateFn, id: str):
        if not inspect.isasyncgenfunction(fn):
            raise TypeError(
                f"@env.template() needs an async generator function (async def with two "
                f"yields: the prompt, then the grade); {fn.__qualname__} is not one"
            )
        self.env = env
        self.fn = fn
        self.id = id
        self.signature = inspect.signature(fn)
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__

    def bind(self, args: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
        """Check args against the template's parameters; unknown or missing ones raise."""
        try:
            bound = self.signature.bind(**args)
        except TypeError as exc:
            params = ", ".join(self.signature.parameters) or "none"
            raise TaskError(
                f"template {self.env.name}/{self.id}: {exc}; its parameters: {params}"
            ) from None
        return dict(bound.arguments)

    def task(self, **args: JSONValue) -> Task:
        """A Task row for this template with ``args`` bound; recorded on the environment."""
        task = Task(self.env.name, self.id, self.bind(args), declared_in=self.env.declared_in)
        if task.key not in self.env.task_keys:  # a set: declaring n tasks stays O(n)
            self.env.task_keys.add(task.key)
            self.env.tasks.append(task)
        return task

    def __call__(self, **args: JSONValue) -> AsyncGenerator[object, None]:
        return self.fn(**args)

    def __repr__(self) -> str:
        return f"<Template {self.env.name}/{self.id}{self.signature}>"


class Environment:
    """An environment declaration: templates, capabilities and lifecycle hooks."""

    def __init__(self, name: str, *, requires: Sequence[str] = (), apt: Sequence[str] = ()) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("Environment needs a non-empty name")
        for what, items in (("requires", requires), ("apt", apt)):
            if isinstance(items, str) or not all(isinstance(i, str) and i for i in items):
                raise TypeError(
                    f"Environment({name!r}, {what}=...) expects a list of non-empty strings, "
                    f"got {items!r}"
                )
        self.name = name
        #: pip requirements and Debian packages an image serving this env needs
        self.requires: tuple[str, ...] = tuple(requires)
        self.apt: tuple[str, ...] = tuple(apt)
        self.templates: dict[str, Template] = {}
        self.tasks: list[Task] = []
        self.task_keys: set[str] = set()
        self.capabilities: dict[str, RobotEndpoint | Mapping[str, JSONValue]] = {}
        self._initializers: list[Callable[[], Awaitable[None]]] = []
        self._shutdowns: list[Callable[[], Awaitable[None]]] = []
        self._started = False
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        self.declared_in = caller.f_globals.get("__file__") if caller is not None else None
        declare(self, self.declared_in)

    def __repr__(self) -> str:
        return f"<Environment {self.name!r} templates={list(self.templates)}>"

    # -- declaration ---------------------------------------------------------------
    def template(self, id: str | None = None) -> Callable[[TemplateFn], Template]:
        """Decorate an async generator: first yield the prompt and bindings, then the grade."""

        def decorate(fn: TemplateFn) -> Template:
            tid = id or fn.__name__
            if tid in self.templates:
                raise ValueError(f"environment {self.name!r} already has a template {tid!r}")
            template = Template(self, fn, tid)
            self.templates[tid] = template
            return template

        return decorate

    def initialize(self, fn: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        self._initializers.append(fn)
        return fn

    def shutdown(self, fn: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        self._shutdowns.append(fn)
        return fn

    def add_capability(self, capability: C, name: str = "robot") -> C:
        """Publish a capability: a RobotEndpoint (started with the env) or a manifest dict."""
        if name in self.capabilities:
            raise ValueError(f"environment {self.name!r} already has a capability {name!r}")
        self.capabilities[name] = capability
        return capability

    def gym(
        self,
        target: object,
        *,
        name: str = "robot",
        num_envs: int = 1,
        fps: float | None = None,
        prompt: str | None = None,
        contract: str | Path | Mapping[str, object] | Contract | None = None,
        success_threshold: float | None = None,
        make_kwargs: Mapping[str, object] | None = None,
        robot_type: str | None = None,
        start_timeout: float = 300.0,
        step_slots_alone: bool | None = None,
        vectorization_mode: str = "sync",
        inline: bool | None = None,
        score_key: str | None = None,
    ) -> RobotEndpoint:
        """Serve a gym-style env as this environment's robot capability; returns its endpoint.

        ``score_key``: an info key whose best value over the episode, clipped to [0, 1], is
        the episode's score (partial credit, e.g. PushT's ``"coverage"``); else 1.0 on
        success and 0.0 otherwise.

        ``step_slots_alone``: a SyncVectorEnv's slots step without a barrier (GymBridge;
        the default where the env allows it, ``False`` keeps the lockstep barrier).
        ``vectorization_mode="async"``: the ``num_envs`` copies step each in its own
        worker process (gymnasium's AsyncVectorEnv), on every core at once.
        ``inline``: where the env steps. Left open (None), in the env server's process, on
        its loop, unless the session asks for sim processes (``--hud-sim-process``);
        ``False``: a sim process of its own (a sim that may crash or hang); ``True``:
        inline whatever the session asks (see :class:`RobotEndpoint`)."""
        from pytest_hud.robot.sim.gym import GymBridge, gym_target
        from pytest_hud.robot.sim.vector import check_mode

        target, extra = gym_target(target)
        kwargs = {
            "target": target,
            "make_kwargs": {**extra, **(make_kwargs or {})},
            "num_envs": num_envs,
            "fps": fps,
            "prompt": prompt,
            "contract": str(contract) if isinstance(contract, Path) else contract,
            "success_threshold": success_threshold,
            "robot_type": robot_type,
        }
        if score_key is not None:
            kwargs["score_key"] = score_key
        if step_slots_alone is not None:
            kwargs["step_slots_alone"] = step_slots_alone
        if vectorization_mode != "sync":
            kwargs["vectorization_mode"] = check_mode(vectorization_mode, step_slots_alone is True)
        endpoint = RobotEndpoint(
            GymBridge, kwargs=kwargs, start_timeout=start_timeout, inline=serve_inline(inline)
        )
        self.add_capability(endpoint, name)
        return endpoint

    def vla_eval(
        self, benchmark: object, *, name: str = "robot", **options: object
    ) -> RobotEndpoint:
        """Serve a vla-eval Benchmark/StepBenchmark (class or instance) as this environment's
        robot capability (the ``vla-eval`` sim kind: vla-eval's interop serves it)."""
        serve_benchmark = sim_kind("vla-eval")
        return self.add_capability(serve_benchmark(benchmark, **options), name)

    def lerobot(
        self,
        env_type: str,
        *,
        name: str = "robot",
        num_envs: int = 1,
        prompt: str | None = None,
        start_timeout: float = 300.0,
        inline: bool | None = False,
        **config: object,
    ) -> RobotEndpoint:
        """Serve LeRobot's own ``env_type`` env (``"pusht"``, ``"aloha"``, ``"metaworld"``,
        ...; ``config``: its EnvConfig's fields, e.g. ``task=``) built by LeRobot's
        ``make_env`` with its env processors, as lerobot-eval sees it (the ``lerobot`` sim
        kind: LeRobot's interop makes it). It keeps a sim process by default: these envs
        render through a GL context (EGL, OSMesa) and run LeRobot's processors on torch,
        which a process of its own keeps out of the env server's (``inline`` as in
        :meth:`gym`)."""
        make_lerobot_env = sim_kind("lerobot")
        return self.gym(
            make_lerobot_env,
            name=name,
            num_envs=num_envs,
            prompt=prompt,
            make_kwargs={"env_type": env_type, **config},
            start_timeout=start_timeout,
            inline=inline,
        )

    def lerobot_robot(
        self, robot_type: str, *, name: str = "robot", **options: object
    ) -> RobotEndpoint:
        """Serve a real robot LeRobot knows (``"so101_follower"``, ``"koch_follower"``, a
        third-party ``lerobot_robot_*`` plugin's type), built by LeRobot's own factory, as
        this environment's robot capability. ``options``: ``fps``, ``prompt``, ``limits``
        (per action name: low, high), ``max_step`` (largest move per tick), ``detector``
        (a success detector over the robot's observation), ``episode_seconds`` (an
        episode's length in the robot's time, default 60 as ``lerobot-record``'s; None for
        no limit), and the robot config's own
        fields (``port=``, ``id=``, ``cameras=``...). One robot is one slot (the
        ``lerobot-robot`` sim kind: LeRobot's interop serves it)."""
        serve_robot = sim_kind("lerobot-robot")
        return self.add_capability(serve_robot(robot_type, **options), name)

    # -- serving -------------------------------------------------------------------
    def get_template(self, id: str) -> Template:
        try:
            return self.templates[id]
        except KeyError:
            known = ", ".join(sorted(self.templates)) or "none"
            raise EnvError(
                f"environment {self.name!r} has no template {id!r}; known templates: {known}"
            ) from None

    async def start(self) -> None:
        """Start capabilities (spawning sims), then run ``@initialize`` hooks."""
        if self._started:
            return
        self._started = True
        for cap in self.capabilities.values():
            if isinstance(cap, RobotEndpoint):
                await cap.start()
        for fn in self._initializers:
            await fn()

    async def stop(self) -> None:
        """Run ``@shutdown`` hooks, then stop every capability; errors do not stop the rest."""
        if not self._started:
            return
        self._started = False
        errors: list[BaseException] = []
        for fn in self._shutdowns:
            try:
                await fn()
            except Exception as exc:
                errors.append(exc)
        for cap in self.capabilities.values():
            if isinstance(cap, RobotEndpoint):
                try:
                    await cap.stop()
                except Exception as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]

    async def manifest(self) -> dict[str, Mapping[str, JSONValue]]:
        """Capability manifests by name (protocol, url, params)."""
        out: dict[str, Mapping[str, JSONValue]] = {}
        for name, cap in self.capabilities.items():
            out[name] = await cap.capability(name) if isinstance(cap, RobotEndpoint) else cap
        return out
