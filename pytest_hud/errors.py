"""The root of every error pytest-hud raises: ``except pytest_hud.HudError`` catches them.

The hierarchy (each error also keeps the builtin base shown, so existing ``except``
clauses still match; the module defining it in brackets)::

    HudError
    ├── TaskError (ValueError)                  [runtime/errors]
    ├── EnvError (LookupError)                  [runtime/errors]
    ├── PlacementError (LookupError)            [runtime/errors]
    ├── SharedScopeError (RuntimeError)         [runtime/errors]
    ├── ControlError (RuntimeError)             [runtime/errors]
    │   └── TemplateError
    ├── SubstrateError (RuntimeError)           [runtime/errors]
    │   ├── BaseImageError                      [runtime/errors]
    │   └── AptError                            [runtime/docker/apt]
    ├── NotReady (TimeoutError)                 [runtime/readiness]
    ├── ConnectError (ConnectionError)          [robot/wire/errors]
    │   └── ConnectTimeout
    ├── TransportClosed (ConnectionError)       [robot/wire/errors]
    ├── WireError (ValueError)                  [robot/wire/errors]
    ├── RobotError (RuntimeError)               [robot/wire/errors]
    ├── ContractError (ValueError)              [robot/contract]
    ├── CompatError (ValueError)                [robot/compat/table]
    ├── CompatWarning (UserWarning)             [robot/compat/table]
    ├── BridgeError (RuntimeError)              [robot/sim/errors]
    │   └── RobotFault                          [interop/lerobot/robots]
    ├── SimError (RuntimeError)                 [robot/sim/errors]
    ├── AgentSpecError (LookupError)            [robot/agent/errors]
    │   └── CheckpointError
    ├── ModelOutputError (ValueError)           [robot/agent/errors]
    ├── AdapterError (ValueError)               [robot/agent/errors]
    ├── RemoteModelError (RuntimeError)         [robot/agent/errors]
    │   └── VlaEvalError                        [interop/vla_eval/session]
    ├── DatasetError (ValueError)               [robot/record/errors]
    ├── LeRobotEnvError (ValueError)            [interop/lerobot/envs]
    ├── RobotSpecError (ValueError)             [interop/lerobot/robots]
    ├── LeRobotVersionError (ImportError)       [robot/lerobot_version]
    ├── VlaEvalWireError (ValueError)           [interop/vla_eval/codec]
    ├── VlaEvalConventionWarning (UserWarning)  [interop/vla_eval/preflight]
    ├── RowError (ValueError)                   [evaluation/results]
    ├── LedgerError (ValueError)                [evaluation/ledger]
    │   └── LedgerWriteError
    ├── OutputWriteError (OSError)              [evaluation/durable]
    ├── StepTableError (RuntimeError)           [evaluation/step_tables]
    ├── EpisodeFailed (AssertionError)          [_plugin/errors]: the policy failed, a FAIL
    ├── ReplayMismatch (AssertionError)         [features/replay]: a FAIL
    ├── ConsoleClosed (RuntimeError)            [features/robots/web]
    ├── RolloutError (RuntimeError)             [_plugin/errors]: infrastructure, an ERROR
    ├── ExpectError (ValueError)                [_plugin/errors]
    ├── ModuleColumnError (ValueError)          [_plugin/errors]
    ├── ChildError (RuntimeError)               [plumbing/process]
    ├── RemoteError (RuntimeError)              [plumbing/rpc]
    ├── RpcClosed (ConnectionError)             [plumbing/rpc]
    ├── AuthError (PermissionError)             [plumbing/rpc]
    ├── PrivateDirError (PermissionError)       [plumbing/private_dir]
    ├── TooDeep (json.JSONDecodeError)          [plumbing/jsonread]
    ├── TrackerError (ValueError)               [trackers]
    ├── TrackerWarning (UserWarning)            [trackers]
    ├── EvaluationError (RuntimeError)          [api]
    └── RenderError (RuntimeError)              [doctor]

Each error is defined in its layer; ``tests/project/test_layers.py`` checks that every public
error derives from :class:`HudError`.
"""

from __future__ import annotations

__all__ = ["HudError"]


class HudError(Exception):
    """Anything pytest-hud raises on purpose (the message says expected / got / fix)."""
