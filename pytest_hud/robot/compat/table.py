"""The preflight's output: one :class:`Row` per feature (what the policy expects, what
the env provides, a verdict, the fix) in a :class:`Table` per policy and env, and the
error and warning that carry a table."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_hud.errors import HudError

__all__ = [
    "MISMATCH",
    "OK",
    "RESIZE",
    "VERDICTS",
    "WARN",
    "CompatError",
    "CompatWarning",
    "Row",
    "Table",
]

OK, RESIZE, WARN, MISMATCH = "ok", "resize", "warn", "MISMATCH"
VERDICTS = (OK, RESIZE, WARN, MISMATCH)


class CompatError(HudError, ValueError):
    """The policy cannot run on the env (the message is the table: both sides, the fix)."""


class CompatWarning(HudError, UserWarning):
    """The policy runs on the env but likely wrongly (the message is the table with fixes)."""


@dataclass(frozen=True)
class Row:
    feature: str
    expects: str
    provides: str
    verdict: str
    fix: str = ""


@dataclass
class Table:
    """The rows for one policy against one env; ``title`` names both."""

    title: str
    rows: list[Row] = field(default_factory=list)

    @property
    def hard(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == MISMATCH]

    @property
    def soft(self) -> list[Row]:
        return [r for r in self.rows if r.verdict in (RESIZE, WARN)]

    def render(self) -> str:
        head = ("feature", "policy expects", "env provides", "verdict")
        cells = [head, *[(r.feature, r.expects, r.provides, r.verdict) for r in self.rows]]
        widths = [min(max(len(c[i]) for c in cells), 44) for i in range(3)]
        lines = [self.title]
        for cell in cells:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=False)))
            lines[-1] += "  " + cell[3]
        fixes = [r for r in self.rows if r.verdict != OK and r.fix]
        if fixes:
            lines.append("  fix:")
            lines += [f"    {r.feature}: {r.fix}" for r in fixes]
        return "\n".join(lines)
