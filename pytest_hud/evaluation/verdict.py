"""The gate rule: a gate owns the episode FAILs of its items; ERRORs, strict XPASSes and non-hud
failures always fail the session. Pure, so controller and xdist runs decide alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pytest_hud.evaluation.document import Row
from pytest_hud.plumbing.printable import printable

__all__ = ["CoveredGate", "Verdict", "decide", "episode_failures", "names_of"]


@dataclass
class CoveredGate:
    """A gate's verdict and the node ids whose episode failures it owns."""

    name: str
    passed: bool
    message: str
    covers: frozenset[str] = field(default_factory=frozenset)


@dataclass
class Verdict:
    failed: bool
    lines: list[tuple[bool, str]]  # (good?, text), one per gate plus the ungated/errors


def episode_failures(rows: Iterable[Row]) -> list[Row]:
    """Rows whose item FAILED on the policy (graded, not an error, not an XPASS)."""
    return [r for r in rows if r.get("outcome") == "failed" and r.get("error") is None]


def names_of(rows: Sequence[Row], limit: int = 3) -> str:
    """The first ``limit`` rows' labels (else node ids), and how many more."""
    shown = ", ".join(printable(r.get("label") or r.get("nodeid")) for r in rows[:limit])
    return shown + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def decide(
    rows: list[Row],
    gates: list[CoveredGate],
    other_failures: int,
    *,
    report_only: bool = False,
) -> Verdict:
    """Does the session fail, and why (one line per gate, one per kind of failure)."""
    fails = episode_failures(rows)
    lines: list[tuple[bool, str]] = []
    failed = False
    for gate in gates:
        owned = sum(1 for r in fails if r.get("nodeid") in gate.covers)
        text = f"{gate.message} [owns {owned} episode failure{'s' * (owned != 1)}]"
        if report_only:
            lines.append((True, f"(not enforced) {text}"))
        else:
            lines.append((gate.passed, text))
            failed |= not gate.passed
    covered = frozenset().union(*(g.covers for g in gates))
    ungated = [r for r in fails if r.get("nodeid") not in covered]
    if report_only and fails:
        lines.append(
            (True, f"report only (--hud-gate=none): {len(fails)} episode failures not gated")
        )
    elif ungated:
        lines.append(
            (
                False,
                f"ungated: {len(ungated)} episode failure{'s' * (len(ungated) != 1)} in items "
                f"no gate covers ({names_of(ungated)}) fail the session",
            )
        )
        failed = True
    errors = [r for r in rows if r.get("outcome") == "error"]
    strict = [r for r in rows if r.get("outcome") == "xpassed" and r.get("strict")]
    if other_failures:
        parts = [f"{len(errors)} rollout errors"] if errors else []
        parts += [f"{len(strict)} strict XPASS"] if strict else []
        rest = other_failures - len(errors) - len(strict)
        parts += [f"{rest} other failures"] if rest > 0 else []
        what = ", ".join(parts) or f"{other_failures} failures"
        lines.append((False, f"errors: {what} always fail the session, gates or not"))
        failed = True
    return Verdict(failed, lines)
