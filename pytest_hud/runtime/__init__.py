"""Placement: task rows, providers and runtimes, the env server and the scheduler."""

from typing import TYPE_CHECKING

from pytest_hud.plumbing.lazy import exports

if TYPE_CHECKING:
    from pytest_hud.errors import (
        ControlError,
        EnvError,
        PlacementError,
        SharedScopeError,
        SubstrateError,
        TaskError,
    )

    # the old name of EnvError (it shadowed the builtin): importable, not exported
    from pytest_hud.errors import EnvError as EnvironmentError  # noqa: F401
    from pytest_hud.runtime.control import ControlClient, Run
    from pytest_hud.runtime.daytona import DaytonaRuntime
    from pytest_hud.runtime.docker.container import DockerRuntime
    from pytest_hud.runtime.environment import Environment, Template
    from pytest_hud.runtime.local import LocalRuntime
    from pytest_hud.runtime.modal import ModalRuntime
    from pytest_hud.runtime.placement import resolve_placement
    from pytest_hud.runtime.provider import Provider, Runtime
    from pytest_hud.runtime.ray.runtime import RayRuntime
    from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
    from pytest_hud.runtime.scheduler import run
    from pytest_hud.runtime.server import EnvServer
    from pytest_hud.runtime.shared import Shared
    from pytest_hud.runtime.subprocess import SubprocessRuntime
    from pytest_hud.runtime.task import RuntimeConfig, Task, Taskset

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "Agent",
    "ControlClient",
    "ControlError",
    "DaytonaRuntime",
    "DockerRuntime",
    "EnvError",
    "EnvServer",
    "Environment",
    "LocalRuntime",
    "ModalRuntime",
    "PlacementError",
    "Provider",
    "RayRuntime",
    "RolloutResult",
    "Run",
    "Runtime",
    "RuntimeConfig",
    "Shared",
    "SharedScopeError",
    "SubprocessRuntime",
    "SubstrateError",
    "Task",
    "TaskError",
    "Taskset",
    "Template",
    "resolve_placement",
    "rollout",
    "run",
]
