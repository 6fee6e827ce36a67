"""``--hud-gate=sequential`` with several agents: a paired sequential test per candidate and task.
Pairs are fed in run order once all earlier ones reported, so ``-n`` decides as a serial run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass

from pytest_hud._plugin.feature_api import Arm, split_arm, task_of_nodeid
from pytest_hud.evaluation.bounded import PairedBettingTest
from pytest_hud.evaluation.decided import DecidedTasks
from pytest_hud.evaluation.paired import PairedSequentialTest, fixed_n_pairs
from pytest_hud.evaluation.paired_verdicts import (
    SequentialState,
    family_alpha,
    graded,
    metric_value,
)
from pytest_hud.evaluation.results import Row, task_of, unit_of

__all__ = ["PairedStopping"]


@dataclass(eq=False, repr=False)
class PairedStopping:
    """The paired sequential tests of a session, fed where rows are collected.

    ``order`` gives the session's node ids in run order (the pairs' feeding order). On
    success with one episode per row each pair feeds the binary test; with ``repeats`` or
    on a score a row's mean difference feeds a betting test once all its repeats reported
    (rows are the units). ``family``: the tests split the gate's level over the tasks and
    ``metrics`` (every metric the gate counts)."""

    arms: list[Arm]
    alpha: float
    order: Callable[[], Sequence[str]]
    _: KW_ONLY
    family: bool = False
    metric: str = "success"
    repeats: int = 1
    max_steps: int | None = None
    metrics: int = 1

    def __post_init__(self) -> None:
        self.repeats = max(int(self.repeats), 1)
        self.by_rows = self.metric != "success" or self.repeats > 1
        self.tests: dict[tuple[str, str], PairedSequentialTest | PairedBettingTest] = {}
        # (candidate, row) -> per repeat (reference value, candidate value) or None (not graded)
        self._row_values: dict[tuple[str, tuple[object, ...]], list[tuple[float, float] | None]] = (
            defaultdict(list)
        )
        #: a task is decided once every candidate's test on it decided
        self.decisions = DecidedTasks(self.task_of_item)
        self.pair_task: dict[str, str] = {}  # pair id -> task, learned from rows
        self.reported: dict[str, dict[str, Row | None]] = defaultdict(dict)
        self._sequence: list[str] | None = None
        self._members: dict[str, set[str]] = defaultdict(set)  # pair id -> its arms' letters
        self._cursor = 0

    # -- feeding ---------------------------------------------------------------------------
    def _pairs(self) -> list[str]:
        if self._sequence is None:
            seen: dict[str, None] = {}
            for nodeid in self.order():
                found = split_arm(nodeid)
                if found is not None:
                    seen.setdefault(found[0], None)
                    self._members[found[0]].add(found[1])
            self._sequence = list(seen)
        return self._sequence

    def reported_item(self, nodeid: str, row: Row | None) -> None:
        """An item's teardown was reported (``row``: its hud row, if it has one): feed every
        pair that is now complete and next in the run order."""
        found = split_arm(nodeid)
        if found is None:
            return
        pair, arm = found
        self.reported[pair][arm] = row
        if row is not None and row.get("task"):
            self.pair_task[pair] = task_of(row)
        pairs = self._pairs()
        while self._cursor < len(pairs):
            nxt = pairs[self._cursor]
            if set(self.reported.get(nxt, {})) < self._members[nxt]:
                return
            self._cursor += 1
            self._feed(self.reported[nxt])

    def _feed(self, rows: Mapping[str, Row | None]) -> None:
        reference = rows.get(self.arms[0].letter)
        if reference is None or not reference.get("task"):
            return
        task = task_of(reference)
        for arm in self.arms[1:]:
            row = rows.get(arm.letter)
            if self.by_rows:
                self._feed_row(arm.letter, task, reference, row)
                continue
            if not graded(reference) or row is None or not graded(row):
                continue
            test = self._test(arm.letter, task, reference)
            undecided = test.decision is None and test.pairs < test.max_pairs
            if isinstance(test, PairedSequentialTest) and undecided:
                test.update(bool(reference["success"]), bool(row["success"]))
        self._decide(task)

    def _test(
        self, letter: str, task: str, reference: Row
    ) -> PairedSequentialTest | PairedBettingTest:
        test = self.tests.get((letter, task))
        if test is None:
            most = int(reference.get("task_pairs") or 0) or self._count(task)
            if self.by_rows:
                rows = max(-(-most // self.repeats), 1)
                test = PairedBettingTest(self._level(), max_pairs=rows)
            else:
                test = PairedSequentialTest(self._level(), max_pairs=max(most, 1))
            self.tests[(letter, task)] = test
        return test

    def _feed_row(self, letter: str, task: str, reference: Row, row: Row | None) -> None:
        """Keep this repeat's values; once the row's repeats all reported, feed its mean
        difference (a row none of whose pairs was scored feeds nothing)."""
        unit = unit_of(reference)
        values = self._row_values[(letter, unit)]
        a = metric_value(reference, self.metric, self.max_steps)
        b = None if row is None else metric_value(row, self.metric, self.max_steps)
        values.append(None if a is None or b is None else (a, b))
        if len(values) < self.repeats:
            return
        scored = [v for v in values if v is not None]
        test = self._test(letter, task, reference)
        if not scored or test.decision is not None or test.pairs >= test.max_pairs:
            return
        diff = sum(b - a for a, b in scored) / len(scored)
        if isinstance(test, PairedBettingTest):
            test.update(diff)

    def _level(self) -> float:
        """Each test's alpha: the session's, or the gate's family level over its tasks."""
        if not self.family:
            return self.alpha
        tasks = {self.pair_task.get(p) or task_of_nodeid(p) for p in self._pairs()}
        return family_alpha(self.alpha, len(tasks - {None}), self.metrics)

    def _count(self, task: str) -> int:
        """The task's pairs in the session (when the rows do not say)."""
        return sum(1 for p in self._pairs() if self.pair_task.get(p) == task)

    def _decide(self, task: str) -> None:
        if self.decisions.reason(task) is not None:
            return
        tests = [(a, self.tests.get((a.letter, task))) for a in self.arms[1:]]
        if any(t is None or t.decision is None for _, t in tests):
            return
        reasons = [
            f"{a.letter} vs {self.arms[0].letter} {t.reason}; {fixed_n_of(t)}"
            for a, t in tests
            if t
        ]
        self.decisions.decide(task, "paired sequential: " + "; ".join(reasons))

    # -- skipping --------------------------------------------------------------------------
    def task_of_item(self, nodeid: str) -> str | None:
        found = split_arm(nodeid)
        if found is None:
            return None
        return self.pair_task.get(found[0]) or task_of_nodeid(nodeid)

    # -- results ---------------------------------------------------------------------------
    def state(self) -> dict[tuple[str, str], SequentialState]:
        """(candidate, task) -> ``decision``, ``pairs_used``, ``max_pairs``, ``reason`` and
        ``saved`` (the task's items not run, every arm's), for the results."""
        out: dict[tuple[str, str], SequentialState] = {}
        for (letter, task), test in sorted(self.tests.items()):
            out[(letter, task)] = {
                "decision": test.decision,
                "pairs_used": test.pairs_used,
                "max_pairs": test.max_pairs,
                "reason": test.reason,
                "saved": self.decisions.saved(task),
                "fixed_n": fixed_n(test),
            }
        return out

    def saved(self) -> int:
        return self.decisions.saved()


def fixed_n(test: PairedSequentialTest | PairedBettingTest) -> int | None:
    """The pairs a fixed-n exact McNemar design of the test's power needs at its design
    effect and the discordance seen so far (None before any discordant pair, and for a
    betting test on rows)."""
    if isinstance(test, PairedBettingTest):
        return None
    discordant = test.a_only + test.b_only
    if not discordant:
        return None
    share = min(max(discordant / max(test.pairs, 1), 0.05), 1.0)
    try:
        return fixed_n_pairs(test.alpha, test.beta, test.delta, share)
    except (ValueError, ImportError):  # no n reaches the power; scipy absent
        return None


def fixed_n_of(test: PairedSequentialTest | PairedBettingTest) -> str:
    needed = fixed_n(test)
    if isinstance(test, PairedBettingTest):
        return "rows as the units: an anytime-valid betting test on the rows' mean differences"
    if needed is None:
        return "no fixed-n figure (no discordant pair yet)"
    return f"a fixed-n design of the same power needs {needed} pairs"
