"""Placement: task rows, providers and runtimes, the env server and the scheduler."""

from pytest_hud.runtime.control import ControlClient, Run
from pytest_hud.runtime.daytona import DaytonaRuntime
from pytest_hud.runtime.docker import DockerRuntime
from pytest_hud.runtime.environment import Environment, Template
from pytest_hud.runtime.errors import (
    ControlError,
    EnvError,
    PlacementError,
    SharedScopeError,
    SubstrateError,
    TaskError,
)
from pytest_hud.runtime.local import LocalRuntime
from pytest_hud.runtime.modal import ModalRuntime
from pytest_hud.runtime.placement import resolve_placement
from pytest_hud.runtime.provider import Provider, Runtime
from pytest_hud.runtime.ray import RayRuntime
from pytest_hud.runtime.rollout import Agent, RolloutResult, rollout
from pytest_hud.runtime.scheduler import run
from pytest_hud.runtime.server import EnvServer
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.subprocess import SubprocessRuntime
from pytest_hud.runtime.task import RuntimeConfig, Task, Taskset

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

#: The old name of :class:`EnvError` (it shadowed the builtin); importable, not exported.
EnvironmentError = EnvError
