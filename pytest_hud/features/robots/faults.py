"""The attended session's fault taxonomy: what an episode's error says about the robot, and
what the session does about it.

- ``halt``: the robot cannot be driven (it does not connect, is not calibrated, another
  process holds it). Nothing a rerun fixes without a person: the session ends, the rows
  left are reported undecided, and the message names the fix.
- ``ask``: the robot faulted in the middle of an episode (a motor error, a dropped
  cable). A person looks at the arm, then says: run the row again, leave it undecided and
  go on, or end the session. Without a console that can ask, the session ends.
- ``retry``: the link between the policy and the robot dropped or timed out while the
  robot was fine: the episode runs again once, by itself; a second failure is the row's
  ERROR.
- ``error``: anything else is the row's ERROR (infrastructure, never a FAIL) and the session
  goes on, as without an operator.

A robot fault is never a policy failure: the row stays an ERROR whatever the session does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Action", "Fault", "classify"]

Action = Literal["halt", "ask", "retry", "error"]

#: what an error's text says, first match wins: (pattern, kind, action)
_RULES: tuple[tuple[re.Pattern[str], str, Action], ...] = (
    (re.compile(r"faulted during (connect|reset_scene)\b"), "robot unreachable", "halt"),
    (re.compile(r"is not calibrated"), "robot not calibrated", "halt"),
    (re.compile(r"is already driven by"), "robot busy", "halt"),
    (re.compile(r"faulted during \w+"), "robot fault", "ask"),
    (
        re.compile(r"(?i)connection (closed|reset|refused|lost)|timed out|no answer within"),
        "link",
        "retry",
    ),
)


#: "pytest_hud.interop.lerobot.robots.RobotFault: " before a relayed error's message
_CLASS = re.compile(r"^[\w.]*(?:Error|Fault|Exception): ")


@dataclass(frozen=True)
class Fault:
    """An episode's error as the session reads it: its ``kind`` (robot unreachable, robot
    fault, link, error) and ``action`` (halt, ask, retry, error)."""

    kind: str
    action: Action
    message: str

    def record(self, taken: str) -> dict[str, str]:
        """The row's ``fault`` field: the kind, the class of action and what was done."""
        return {"kind": self.kind, "action": self.action, "taken": taken}


def classify(error: str, error_type: str | None = None) -> Fault:
    """The fault an episode's ``error`` is; its ``message`` is the line that says so (an
    error relayed from the robot's process may start with the traceback)."""
    for pattern, kind, action in _RULES:
        for line in error.splitlines():
            if pattern.search(line):  # without the exception's class name before it
                return Fault(kind, action, _CLASS.sub("", line.strip()))
    first = next((line for line in error.splitlines() if line.strip()), error)
    if error_type in ("TimeoutError", "ConnectionClosedError", "ConnectionResetError"):
        return Fault("link", "retry", first)
    return Fault("error", "error", first)
