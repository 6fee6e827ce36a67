"""pytest-hud: policy evaluation as pytest tests."""

from pytest_hud.errors import HudError
from pytest_hud.runtime import (
    ControlClient,
    DockerRuntime,
    Environment,
    LocalRuntime,
    ModalRuntime,
    Provider,
    RolloutResult,
    Run,
    Runtime,
    RuntimeConfig,
    Shared,
    SubprocessRuntime,
    Task,
    Taskset,
    run,
)

__version__ = "0.1.0"

__all__ = [
    "ControlClient",
    "DockerRuntime",
    "Environment",
    "HudError",
    "LocalRuntime",
    "ModalRuntime",
    "Provider",
    "RolloutResult",
    "Run",
    "Runtime",
    "RuntimeConfig",
    "Shared",
    "SubprocessRuntime",
    "Task",
    "Taskset",
    "__version__",
    "run",
]
