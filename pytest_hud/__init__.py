"""pytest-hud: policy evaluation as pytest tests."""

from typing import TYPE_CHECKING

from pytest_hud.errors import HudError
from pytest_hud.plumbing.lazy import exports

if TYPE_CHECKING:
    from pytest_hud.api import Results, evaluate
    from pytest_hud.features.wrap.episodes import wrap
    from pytest_hud.runtime import (
        ControlClient,
        DaytonaRuntime,
        DockerRuntime,
        Environment,
        LocalRuntime,
        ModalRuntime,
        Provider,
        RayRuntime,
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

__getattr__, __dir__ = exports(__name__, __file__)

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022 - grouped by what a user reaches for, not sorted
    # task rows
    "Task",
    "Taskset",
    "RuntimeConfig",
    # where rollouts run
    "Provider",
    "Runtime",
    "LocalRuntime",
    "SubprocessRuntime",
    "DockerRuntime",
    "ModalRuntime",
    "RayRuntime",
    "DaytonaRuntime",
    "Shared",
    # what an env module declares
    "Environment",
    # running rows
    "evaluate",
    "Results",
    "run",
    "RolloutResult",
    "wrap",
    "ControlClient",
    "Run",
    # the root of every error
    "HudError",
    "__version__",
]
