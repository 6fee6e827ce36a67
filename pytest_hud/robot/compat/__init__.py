"""What a policy expects set against what an env's contract provides: the preflight table.

Shared by both sides: it reads a :class:`PolicySpec` (plain data the agent side builds
from a checkpoint or a server's metadata, :mod:`pytest_hud.robot.agent.expects`) and a
:class:`~pytest_hud.robot.contract.Contract`, and imports neither side. Each row is one
feature: what the policy expects, what the env provides, a verdict and the fix.

Verdicts: ``ok``; ``resize`` (a camera of another size: the policy sees a rescaled
image); ``warn`` (it runs, likely wrongly: missing normalization stats, states far
outside the checkpoint's stats, actions outside the env's range, a chunk longer than the
episode); ``MISMATCH`` (it cannot run: a camera or state the policy needs is missing or
of another size, an action of another size).

``policy`` (the spec), ``table`` (rows, verdicts, the error and warning), ``inputs`` (the
rows that need no run), ``steps`` (what the first steps of an episode show).
"""

from pytest_hud.robot.compat.inputs import compare
from pytest_hud.robot.compat.policy import Need, PolicySpec
from pytest_hud.robot.compat.steps import STATE_SDS, action_rows, chunk_row, state_rows
from pytest_hud.robot.compat.table import (
    MISMATCH,
    OK,
    RESIZE,
    VERDICTS,
    WARN,
    CompatError,
    CompatWarning,
    Row,
    Table,
)

__all__ = [
    "MISMATCH",
    "OK",
    "RESIZE",
    "STATE_SDS",
    "VERDICTS",
    "WARN",
    "CompatError",
    "CompatWarning",
    "Need",
    "PolicySpec",
    "Row",
    "Table",
    "action_rows",
    "chunk_row",
    "compare",
    "state_rows",
]
