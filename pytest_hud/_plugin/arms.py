"""A/B arms: repeated ``--hud-agent`` (globs over checkpoints expand). Item ids end in
``@LETTER``; the first agent is the reference, the last the candidate.
"""

from __future__ import annotations

import glob
import os
import random
import re
from dataclasses import dataclass

import pytest

from pytest_hud._plugin.internals import from_controller
from pytest_hud._plugin.option_table import OptionTable
from pytest_hud.robot.agent.registry import AgentSpec, checkpoint_step

__all__ = [
    "ARM_OPTIONS",
    "HANDED_AGENTS",
    "HANDED_SEED",
    "Arm",
    "arms_of",
    "expand_spec",
    "read_ab_seed",
    "read_agents",
    "split_arm",
    "task_of_nodeid",
]

ARM_OPTIONS: OptionTable = [
    (
        "--hud-ab-seed",
        "with several --hud-agent: the seed of the shuffled, interleaved run order of the "
        "arms' items (default: a random one, printed in the header and stored in the "
        "results JSON)",
        {"type": int},
    ),
    (
        "--hud-ab-gate",
        "with several --hud-agent: fail the session when the candidate (the last agent) is "
        "worse than the reference (the first) on any task or overall (paired verdict at "
        "--hud-alpha); the gate owns every arm's episode failures",
        {"action": "store_true"},
    ),
    (
        "--hud-ab-metric",
        "with several --hud-agent: the metrics the paired verdicts and the gate judge, "
        "comma-separated, the first also --hud-gate=sequential's live stopping: success "
        "(default), score (a grade in [0, 1], e.g. partial credit), steps (time to success, "
        "lower better, bounded by --hud-max-steps); rows are the units (a row's repeats are "
        "averaged first), and the gate is Holm over every task and metric",
        {},
    ),
]

#: workerinput keys: the controller's expanded agents and order seed, for every worker
HANDED_AGENTS = "hud_agents"
HANDED_SEED = "hud_ab_seed"

_GLOB = re.compile(r"[*?\[]")
#: an arm's tag in a node id: ``@B`` closing the hud parameter (or before another one)
_TAG = re.compile(r"@([A-Z]{1,3})(?=\]$|-)")
#: a row id's trailing hash slug (``env/template-1a2b3c4d``) or repeat (``[3]``)
_SLUG = re.compile(r"-[0-9a-f]{8}$")


@dataclass(frozen=True)
class Arm:
    """One agent of a paired session: its letter, spec and name (``label``).

    ``label`` is the training step of a ``checkpoints/NNNNNN`` checkpoint when every arm
    has a distinct one (a sweep: ``--hud-expect`` tables named by step apply, as
    ``--hud-checkpoint=STEP`` does for one agent), else the spec."""

    letter: str
    spec: str
    step: int | None
    label: str
    index: int

    @property
    def checkpoint_path(self) -> str | None:
        kind, _, rest = self.spec.partition(":")
        return rest if kind == "lerobot" and rest else None


def letter(index: int) -> str:
    """A, B, ..., Z, AA, AB, ...: the arm's tag."""
    out = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def arms_of(specs: list[str]) -> list[Arm]:
    """The arms of ``specs`` (none for a single agent)."""
    if len(specs) < 2:
        return []
    steps = [AgentSpec(s).step for s in specs]
    sweep = None not in steps and len(set(steps)) == len(steps)
    return [
        Arm(letter(i), s, st, str(st) if sweep else s, i)
        for i, (s, st) in enumerate(zip(specs, steps, strict=True))
    ]


def expand_spec(spec: str) -> list[str]:
    """A ``lerobot:GLOB`` as one spec per matched folder, by training step; else ``[spec]``."""
    kind, _, path = spec.partition(":")
    if kind != "lerobot" or not _GLOB.search(path):
        return [spec]
    found: dict[str, str] = {}  # real path -> the match naming it (a step beats "last")
    for match in sorted(glob.glob(path)):
        if not os.path.isdir(match):
            continue
        real = os.path.realpath(match)
        if real not in found or checkpoint_step(found[real]) is None:
            found[real] = match
    if not found:
        raise pytest.UsageError(
            f"--hud-agent={spec}: expected the glob to match checkpoint folders, got none; "
            "fix: point it at a training run's checkpoints, e.g. "
            "lerobot:outputs/train/act/checkpoints/*/pretrained_model"
        )

    def order(match: str) -> tuple[int, int, str]:
        step = checkpoint_step(match)
        return (step is None, step or 0, match)

    return [f"lerobot:{m}" for m in sorted(found.values(), key=order)]


def read_agents(config: pytest.Config) -> list[AgentSpec]:
    """The one reader of ``--hud-agent``: every value (globs expanded), else the ini's one,
    else ``random``, each checked (an unknown form is one usage error naming the valid ones);
    an xdist worker takes the controller's expansion."""
    from pytest_hud.robot.agent.errors import AgentSpecError

    handed = from_controller(config, HANDED_AGENTS)
    if handed:
        return [AgentSpec(str(s)) for s in handed]
    raw = _given_specs(config) or ["random"]
    try:
        return [AgentSpec.parse(out, "--hud-agent") for s in raw for out in expand_spec(s)]
    except AgentSpecError as exc:
        raise pytest.UsageError(str(exc)) from None


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


def read_ab_seed(config: pytest.Config) -> int:
    """``--hud-ab-seed`` (else the ini's, else the controller's, else a fresh one)."""
    given = config.getoption("hud_ab_seed")
    if given is None:
        ini = config.getini("hud_ab_seed")
        if ini not in (None, "", []):
            try:
                given = int(str(ini))
            except ValueError:
                raise pytest.UsageError(f"ini option hud_ab_seed = {ini!r} is not an int") from None
    if given is None:
        given = from_controller(config, HANDED_SEED)
    if given is None:
        given = _resumed_seed(config)
    if given is None:
        given = random.SystemRandom().randrange(2**31)
    return int(given)


def _resumed_seed(config: pytest.Config) -> int | None:
    """The order's seed of the last paired run in ``--hud-resume``'s ledger: a resumed
    session continues the same interleaved (and blinded) schedule."""
    from pytest_hud.evaluation import ledger

    path = config.getoption("hud_resume", None) or None
    if path is None:
        return None
    try:
        runs = list(ledger.read(path).runs.values())
    except (OSError, ledger.LedgerError):  # the resume feature reports it
        return None
    for run in reversed(runs):
        seed = (run.get("provenance") or {}).get("ab_seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            return seed
    return None


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
    return _SLUG.sub("", head.group(0))
