"""What a policy expects set against what an env's contract provides: the preflight table. Reads
plain data from both sides and imports neither.
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
