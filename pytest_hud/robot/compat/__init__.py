"""What a policy expects set against what an env's contract provides: the preflight table.

Reads a :class:`PolicySpec` (plain data, :mod:`pytest_hud.robot.agent.expects`) and a
:class:`~pytest_hud.robot.contract.Contract` and imports neither side. One row per feature with
a verdict: ``ok``, ``resize``, ``warn`` (runs, likely wrongly) or ``MISMATCH`` (cannot run),
and the fix.
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
