"""Every error pytest-hud raises, in one module: ``except pytest_hud.HudError`` catches them.

The hierarchy (each error also keeps the builtin base shown, so existing ``except``
clauses still match; the module defining it in brackets: "here" for the errors every layer
shares, defined below by layer; an error one module alone raises lives beside it)::

    HudError
    ├── TaskError (ValueError)                  [here]
    ├── EnvError (LookupError)                  [here]
    ├── PlacementError (LookupError)            [here]
    ├── SharedScopeError (RuntimeError)         [here]
    ├── ControlError (RuntimeError)             [here]
    │   └── TemplateError
    ├── SubstrateError (RuntimeError)           [here]
    │   ├── BaseImageError                      [here]
    │   └── AptError                            [runtime/docker/apt]
    ├── NotReady (TimeoutError)                 [runtime/readiness]
    ├── ConnectError (ConnectionError)          [here]
    │   └── ConnectTimeout
    ├── TransportClosed (ConnectionError)       [here]
    ├── WireError (ValueError)                  [here]
    ├── RobotError (RuntimeError)               [here]
    ├── ContractError (ValueError)              [robot/contract]
    ├── CompatError (ValueError)                [robot/compat/table]
    ├── CompatWarning (UserWarning)             [robot/compat/table]
    ├── BridgeError (RuntimeError)              [here]
    │   └── RobotFault                          [interop/lerobot/robots]
    ├── SimError (RuntimeError)                 [here]
    ├── AgentSpecError (LookupError)            [here]
    │   └── CheckpointError
    ├── ModelOutputError (ValueError)           [here]
    ├── AdapterError (ValueError)               [here]
    ├── RemoteModelError (RuntimeError)         [here]
    ├── NotServable (ValueError)                [robot/agent/shell]
    ├── ServerError (RuntimeError)              [features/devices/servers]
    ├── PlannerError (RuntimeError)             [suites/maniskill/planner]
    │   └── VlaEvalError                        [interop/vla_eval/connection]
    ├── DatasetError (ValueError)               [here]
    ├── LeRobotEnvError (ValueError)            [interop/lerobot/envs]
    ├── RobotSpecError (ValueError)             [interop/lerobot/robots]
    ├── LeRobotVersionError (ImportError)       [robot/lerobot_version]
    ├── VlaEvalWireError (ValueError)           [interop/vla_eval/codec]
    ├── VlaEvalConventionWarning (UserWarning)  [interop/vla_eval/preflight]
    ├── RowError (ValueError)                   [evaluation/results]
    ├── LedgerError (ValueError)                [evaluation/ledger_file]
    │   └── LedgerWriteError
    ├── OutputWriteError (OSError)              [evaluation/durable]
    ├── StepTableError (RuntimeError)           [evaluation/step_tables]
    ├── EpisodeFailed (AssertionError)          [here]: the policy failed, a FAIL
    ├── ReplayMismatch (AssertionError)         [features/replay]: a FAIL
    ├── ConsoleClosed (RuntimeError)            [features/robots/web]
    ├── RolloutError (RuntimeError)             [here]: infrastructure, an ERROR
    ├── ExpectError (ValueError)                [here]
    ├── ModuleColumnError (ValueError)          [here]
    ├── ChildError (RuntimeError)               [plumbing/process]
    ├── RemoteError (RuntimeError)              [plumbing/rpc]
    ├── RpcClosed (ConnectionError)             [plumbing/rpc]
    ├── AuthError (PermissionError)             [plumbing/rpc]
    ├── PrivateDirError (PermissionError)       [plumbing/private_dir]
    ├── TooDeep (json.JSONDecodeError)          [plumbing/jsonread]
    ├── TrackerError (ValueError)               [features/trackers/figures]
    ├── TrackerWarning (UserWarning)            [features/trackers/figures]
    ├── EvaluationError (RuntimeError)          [api]
    └── RenderError (RuntimeError)              [doctor]

``tests/project/test_layers.py`` checks that every public error derives from
:class:`HudError`.
"""

from __future__ import annotations

from typing import Protocol

__all__ = [
    "AdapterError",
    "AgentSpecError",
    "BaseImageError",
    "BridgeError",
    "CheckpointError",
    "ConnectError",
    "ConnectTimeout",
    "ControlError",
    "DatasetError",
    "EnvError",
    "EpisodeFailed",
    "ExpectError",
    "HudError",
    "ModelOutputError",
    "ModuleColumnError",
    "PlacementError",
    "RemoteModelError",
    "RobotError",
    "RolloutError",
    "SharedScopeError",
    "SimError",
    "SubstrateError",
    "TaskError",
    "TemplateError",
    "TransportClosed",
    "WireError",
]


class HudError(Exception):
    """Anything pytest-hud raises on purpose (the message says expected / got / fix)."""


# -- runtime.errors -----------------------------------------------------------------
class TaskError(HudError, ValueError):
    """A malformed task row; the message names the row and the field."""


class SharedScopeError(HudError, RuntimeError):
    """A Shared provider was used outside ``async with shared:``."""


class EnvError(HudError, LookupError):
    """An unknown env or template, or a template that breaks the two-yield protocol."""


class PlacementError(HudError, LookupError):
    """No runtime was given and none could be inferred for some rows."""


class ControlError(HudError, RuntimeError):
    """The env server refused or failed a control call (the message says which and why)."""


class SubstrateError(HudError, RuntimeError):
    """A substrate would not come up (the message carries its output or logs)."""


class BaseImageError(SubstrateError):
    """No base image for env images: none on the engine, no registry gave one and none
    could be built from the host's Python."""


class TemplateError(ControlError):
    """The user's template raised on the env server: carries the template's own exception
    type (``type_name``) and the traceback lines from the user's modules, so the error
    points at the env file rather than at the control channel."""

    def __init__(self, method: str, type_name: str, message: str, user_frames: str) -> None:
        text = f"the template raised {type_name}: {message} (during {method}())"
        if user_frames:
            text += "\n" + user_frames
        super().__init__(text)
        self.type_name = type_name
        self.user_frames = user_frames


# -- robot.agent.errors -------------------------------------------------------------
class AgentSpecError(HudError, LookupError):
    """An agent name that names nothing; the message lists the valid forms."""


class ModelOutputError(HudError, ValueError):
    """A model returned something that is not an action chunk of the expected size."""


class AdapterError(HudError, ValueError):
    """The env's spaces cannot be wired onto the model's inputs (names both sides)."""


class RemoteModelError(HudError, RuntimeError):
    """The policy server refused, failed, went silent or went away."""


class CheckpointError(AgentSpecError):
    """A LeRobot checkpoint that cannot be loaded (names the checkpoint and the way out)."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        #: The underlying failure, when another error caused this one.
        self.reason = reason


# -- robot.sim.errors ---------------------------------------------------------------
class BridgeError(HudError, RuntimeError):
    """A protocol or episode error the bridge reports to an agent or the endpoint."""


class SimError(HudError, RuntimeError):
    """The sim process failed: it would not start, it crashed, or a control call failed."""


# -- robot.record.errors ------------------------------------------------------------
class DatasetError(HudError, ValueError):
    """Recording cannot start or continue; the message names the feature or folder."""


# -- robot.wire.errors --------------------------------------------------------------
class ConnectError(HudError, ConnectionError):
    """The connection or its opening handshake failed; the message says why."""


class ConnectTimeout(ConnectError):
    """The connection or its opening handshake did not finish within ``open_timeout``."""


class TransportClosed(HudError, ConnectionError):
    """The connection is closed; ``code`` and ``reason`` come from the close frame."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        self.code = code
        self.reason = reason
        super().__init__(self.describe())

    def describe(self) -> str:
        what = "no close frame" if self.code is None else f"code {self.code}"
        return what + (f" ({self.reason})" if self.reason else "")


class WireError(HudError, ValueError):
    """A frame that cannot be encoded or decoded as openpi/0."""


class RobotError(HudError, RuntimeError):
    """The bridge reported an error, closed the connection, or did not answer in time."""


# -- _plugin.errors -----------------------------------------------------------------
class _Rollout(Protocol):
    """What the two item errors read of a rollout's result (``RolloutResult``)."""

    @property
    def phase(self) -> str | None: ...

    @property
    def error(self) -> str | None: ...

    def summary(self) -> str: ...


class EpisodeFailed(HudError, AssertionError):
    """The policy did not succeed at the task: a test failure."""

    def __init__(self, result: _Rollout) -> None:
        super().__init__(f"episode failed: {result.summary()}")
        self.result = result


class RolloutError(HudError, RuntimeError):
    """Infrastructure failed (substrate, bridge, timeout, agent crash): a test error."""

    def __init__(self, result: _Rollout) -> None:
        super().__init__(f"rollout could not be graded ({result.phase}): {result.error}")
        self.result = result


class ExpectError(HudError, ValueError):
    """A malformed expectations file (names the file and the table)."""


class ModuleColumnError(HudError, ValueError):
    """A task row's ``module`` column names code outside the project (see module_rows)."""
