"""A/B arms: repeated ``--hud-agent`` (globs over checkpoints expand). Item ids end in
``@LETTER``; the first agent is the reference, the last the candidate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from pytest_hud._plugin.internals import from_controller
from pytest_hud.errors import AgentSpecError
from pytest_hud.robot.agent.registry import DEFAULT_AGENT, AgentSpec
from pytest_hud.runtime.task import without_args_hash

__all__ = [
    "HANDED_AGENTS",
    "Arm",
    "agent_given",
    "arms_of",
    "read_agents",
    "split_arm",
    "task_of_nodeid",
]

#: the workerinput key of the controller's expanded agents (every worker runs the same arms)
HANDED_AGENTS = "hud_agents"

#: an arm's tag in a node id: ``@B`` closing the hud parameter (or before another one)
_TAG = re.compile(r"@([A-Z]{1,3})(?=\]$|-)")


@dataclass(frozen=True)
class Arm:
    """One agent of a paired session: its letter, spec and name (``label``).

    ``label`` is the training step of a ``checkpoints/NNNNNN`` checkpoint when every arm
    has a distinct one (a sweep: ``--hud-expect`` tables named by step apply, as
    ``--hud-checkpoint=STEP`` does for one agent), else the spec."""

    letter: str
    spec: AgentSpec
    label: str
    index: int

    @property
    def step(self) -> int | None:
        return self.spec.step


def letter(index: int) -> str:
    """A, B, ..., Z, AA, AB, ...: the arm's tag."""
    out = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def arms_of(specs: Sequence[AgentSpec]) -> list[Arm]:
    """The arms of ``specs`` (none for a single agent)."""
    if len(specs) < 2:
        return []
    steps = [s.step for s in specs]
    sweep = None not in steps and len(set(steps)) == len(steps)
    return [Arm(letter(i), s, str(s.step) if sweep else s.text, i) for i, s in enumerate(specs)]


def read_agents(config: pytest.Config) -> list[AgentSpec]:
    """The one reader of ``--hud-agent``: every value (globs expanded), else the ini's one,
    else ``random``, each checked (an unknown form is one usage error naming the valid ones);
    an xdist worker takes the controller's expansion."""
    handed = from_controller(config, HANDED_AGENTS)
    if handed:
        return [AgentSpec(str(s)) for s in handed]
    raw = _given_specs(config) or [DEFAULT_AGENT.text]
    try:
        given = [AgentSpec.parse(s, "--hud-agent") for s in raw]
    except AgentSpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        return [out for spec in given for out in spec.expand()]
    except AgentSpecError as exc:  # a glob matching no checkpoint
        raise pytest.UsageError(f"--hud-agent={exc}") from None


def agent_given(config: pytest.Config) -> bool:
    """Whether ``--hud-agent`` or the ini's ``hud_agent`` names the agent (else: ``random``)."""
    return bool(_given_specs(config))


def _given_specs(config: pytest.Config) -> list[str]:
    """The ``--hud-agent`` values, else the ini's ``hud_agent``, else none."""
    raw: list[str] | str | None = config.getoption("hud_agent")
    if isinstance(raw, str):  # set programmatically as one value
        raw = [raw]
    if raw:
        return list(raw)
    ini = config.getini("hud_agent")
    return [str(ini)] if ini not in (None, "", []) else []


def split_arm(nodeid: str) -> tuple[str, str] | None:
    """(the pair's id: the node id without its tag, the arm's letter), or None."""
    matches = list(_TAG.finditer(nodeid))
    if not matches:
        return None
    found = matches[-1]
    return nodeid[: found.start()] + nodeid[found.end() :], found.group(1)


def task_of_nodeid(nodeid: str) -> str | None:
    """The ``env/template`` an arm item's row runs, read from its id (for the xdist
    controller, which holds ids only); None where the id does not say."""
    _, bracket, param = nodeid.partition("[")
    if not bracket:
        return None
    head = re.match(r"[^\[@]+", param)
    if head is None or "/" not in head.group(0):
        return None
    return without_args_hash(head.group(0))
