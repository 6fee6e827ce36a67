"""Several ``--hud-agent``: an A/B test or a checkpoint sweep in one paired session. Pairs are
shuffled by ``--hud-ab-seed`` (every worker collects the same order); reports and the
``--hud-ab-gate`` use :mod:`pytest_hud.evaluation.paired_verdicts`.
"""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.feature_api import (
    OUR_FIXTURES,
    Arm,
    FeatureSettings,
    Figure,
    Hud,
    HudCase,
    HudOptions,
    option,
    split_arm,
    uses_fixture_from,
)
from pytest_hud.evaluation import provenance
from pytest_hud.evaluation.paired_verdicts import (
    ArmEntry,
    Comparison,
    agent_blocks,
    family_alpha,
    format_ab_table,
    paired_block,
    worse_for_the_gate,
)
from pytest_hud.evaluation.results import Row, uncovered
from pytest_hud.evaluation.verdict import CoveredGate
from pytest_hud.features.ab.stopping import PairedStopping
from pytest_hud.runtime.backends import DEFAULT

if TYPE_CHECKING:
    from pytest_hud.runtime.rollout import Agent

__all__ = ["AB_METRICS", "ArmsPlugin", "Settings", "configure", "enable"]

#: what --hud-ab-metric may name
AB_METRICS = ("success", "score", "steps")


def _metrics(text: str) -> tuple[str, ...]:
    found = tuple(m.strip() for m in text.split(",") if m.strip())
    if not found or set(found) - set(AB_METRICS) or len(set(found)) < len(found):
        raise ValueError(
            f"--hud-ab-metric: expected distinct metrics among {', '.join(AB_METRICS)} "
            f"(comma-separated), got {text or 'none'}"
        )
    return found


class Settings(FeatureSettings):
    gate: bool = option(
        "--hud-ab-gate",
        "with several --hud-agent: fail the session when the candidate (the last agent) is "
        "worse than the reference (the first) on any task or overall (paired verdict at "
        "--hud-alpha); the gate owns every arm's episode failures",
        default=False,
        kind="flag",
    )
    metrics: tuple[str, ...] = option(
        "--hud-ab-metric",
        "with several --hud-agent: the metrics the paired verdicts and the gate judge, "
        "comma-separated, the first also --hud-gate=sequential's live stopping: success "
        "(default), score (a grade in [0, 1], e.g. partial credit), steps (time to success, "
        "lower better, bounded by --hud-max-steps); rows are the units (a row's repeats are "
        "averaged first), and the gate is Holm over every task and metric",
        default=("success",),
        parse=_metrics,
    )

    @property
    def metric(self) -> str:
        """The live test's metric: the first."""
        return self.metrics[0]


def configure(settings: Settings, options: HudOptions) -> HudOptions:
    """What the arms' settings cannot be combined with (one usage error naming the fix);
    a paired sequential session decides items before they run."""
    if len(options.agents) < 2:
        if settings.gate:
            raise pytest.UsageError(
                "--hud-ab-gate compares agents: expected --hud-agent at least twice "
                f"(reference first, candidate last), got {options.agent_texts}"
            )
        return options
    if "steps" in settings.metrics and not options.max_steps:
        raise pytest.UsageError(
            "--hud-ab-metric=steps compares time to success, which needs a bound: expected "
            "--hud-max-steps=N (a failed episode counts as N steps), got none"
        )
    if options.gate == "sequential":
        return dataclasses.replace(options, drops_items=True)
    return options


def _task(case: HudCase) -> str:
    return f"{case.row.env}/{case.row.id}"


class ArmsPlugin:
    """The paired session's ordering, agents, statistics and reports (see the module doc)."""

    def __init__(self, settings: Settings, hud: Hud) -> None:
        self.hud = hud
        self.settings = settings
        self.options = hud.options
        self.arms: list[Arm] = list(hud.arms)
        self.seed = int(hud.options.ab_seed or 0)
        self.task_pairs: dict[str, int] = {}  # where items are collected: pairs per task
        self.stopping: PairedStopping | None = None
        if self.options.gate == "sequential":
            self.stopping = PairedStopping(
                self.arms,
                self.options.alpha,
                lambda: list(hud.order),
                family=settings.gate,
                metric=settings.metric,
                repeats=self.options.group or 1,
                max_steps=self.options.max_steps,
                metrics=len(settings.metrics),
            )
        self._cache: tuple[tuple[int, int, int], list[Comparison]] | None = None
        self.plot: Path | None = None
        self.plot_error: str | None = None

    def describe(self, *, hashes: bool = False) -> list[ArmEntry]:
        """The arms as the results JSON lists them (with checkpoint hashes if asked)."""
        out = []
        for arm in self.arms:
            role = "reference" if arm.index == 0 else None
            role = "candidate" if arm.index == len(self.arms) - 1 else role
            entry: ArmEntry = {"arm": arm.letter, "spec": arm.spec.text, "label": arm.label}
            entry["step"], entry["role"] = arm.step, role
            path = arm.spec.checkpoint
            if hashes and path is not None:
                try:
                    digest: str | None = provenance.checkpoint_hash(path)
                except (OSError, ValueError):  # a hub id, not a local folder
                    digest = None
                entry["checkpoint"] = {"path": path, "hash": digest}
            out.append(entry)
        return out

    # -- header and workers ----------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = [
            f"hud A/B: {len(self.arms)} agents, pairs in a shuffled interleaved order, "
            f"seed {self.seed} (--hud-ab-seed={self.seed} replays it)"
        ]
        if config.hook.pytest_hud_blinded(config=config):
            return [*lines, "  the arms are blinded: which agent is which is said at the end"]
        for entry in self.describe():
            role = f" ({entry['role']})" if entry["role"] else ""
            step = f", step {entry['step']}" if entry["step"] is not None else ""
            lines.append(f"  {entry['arm']} = {entry['spec']}{step}{role}")
        return lines

    # -- collection --------------------------------------------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Interleave and shuffle the arms' items by the seed (pairs, then arms in each)."""
        slots = [i for i, item in enumerate(items) if self._case(item) is not None]
        blocks: dict[str, list[pytest.Item]] = {}
        for i in slots:
            item = items[i]
            if "hud_agent" in getattr(item, "fixturenames", ()) and not uses_fixture_from(
                item, "hud_agent", OUR_FIXTURES
            ):
                raise pytest.UsageError(
                    f"{item.nodeid}: several --hud-agent run every row under each agent, "
                    "but this test overrides the hud_agent fixture; fix: give one "
                    "--hud-agent, or drop the override"
                )
            found = split_arm(item.nodeid)
            blocks.setdefault(found[0] if found else item.nodeid, []).append(item)
        rng = random.Random(self.seed)
        keys = list(blocks)
        rng.shuffle(keys)
        ordered: list[pytest.Item] = []
        for key in keys:
            block = blocks[key]
            rng.shuffle(block)
            ordered.extend(block)
        for i, item in zip(slots, ordered, strict=True):
            items[i] = item

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Each task's pairs among the items selected (after -k, -m, ...)."""
        pairs: dict[str, set[str]] = defaultdict(set)
        for item in session.items:
            case, found = self._case(item), split_arm(item.nodeid)
            if case is not None and found is not None:
                pairs[_task(case)].add(found[0])
        self.task_pairs = {task: len(ids) for task, ids in pairs.items()}

    def _case(self, item: pytest.Item) -> HudCase | None:
        case = self.hud.case_of(item)
        return case if case is not None and case.arm is not None else None

    # -- running -----------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_case_agent(self, case: HudCase) -> Agent | None:
        if case.arm is None:
            return None
        return self.hud.load_agent(case.arm.spec)

    @pytest.hookimpl
    def pytest_hud_skip_case(self, case: HudCase) -> str | None:
        if self.stopping is None or case.arm is None:
            return None
        return self.stopping.decisions.reason(_task(case))

    @pytest.hookimpl
    def pytest_hud_row(self, item: pytest.Item, row: Row) -> None:
        """The pair the row belongs to, its task's pair count and a one-agent replay."""
        case = self._case(item)
        found = split_arm(item.nodeid)
        if case is None or case.arm is None or found is None:
            return
        row["pair"] = found[0]
        row["task_pairs"] = self.task_pairs.get(_task(case), 0)
        runtime = None if self.options.runtime.raw == DEFAULT else self.options.runtime.raw
        # with one --hud-agent the id has no tag: the pair's id is this episode's
        row["repro"] = provenance.repro_command(
            found[0], case.arm.spec.text, self.options.seed, runtime=runtime
        )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Where rows are collected: feed the paired sequential tests, count skips."""
        if self.stopping is None or self.hud.is_worker:
            return
        if report.when == "setup" and report.skipped:
            self.stopping.decisions.skipped_at_setup(report.nodeid, str(report.longrepr))
        if report.when == "teardown":
            self.stopping.reported_item(report.nodeid, self.hud.rows.get(report.nodeid))

    @pytest.hookimpl
    def pytest_hud_decided(self, nodeid: str) -> str | None:
        """On the xdist controller: a decided task's items are dropped before they are sent."""
        return None if self.stopping is None else self.stopping.decisions.item_reason(nodeid)

    @pytest.hookimpl
    def pytest_hud_unrun(self, nodeid: str) -> str | None:
        """A pair not run because its task's paired test decided: ``decided``."""
        decided = self.pytest_hud_decided(nodeid)
        return None if decided is None else "decided"

    # -- verdicts and reports ------------------------------------------------------------
    def comparisons(self, rows: list[Row]) -> list[Comparison]:
        """Each candidate against the reference (:func:`.verdicts.paired_block`)."""
        saved = self.stopping.saved() if self.stopping is not None else 0
        key = (len(rows), saved, sum(1 for r in rows if r.get("success") is not None))
        if self._cache is None or self._cache[0] != key:
            seq = self.stopping.state() if self.stopping is not None else None
            block = paired_block(
                rows,
                self.describe(),
                alpha=self.options.alpha,
                sequential=seq,
                metric=self.settings.metric,
                max_steps=self.options.max_steps,
                also=self.settings.metrics[1:],
            )
            self._cache = (key, block)
        return self._cache[1]

    @pytest.hookimpl
    def pytest_hud_gates(self, rows: list[Row]) -> list[CoveredGate]:
        """The sweep plot; with --hud-ab-gate, the candidate-not-worse gate."""
        comparisons = self.comparisons(rows)
        self._write_plot(rows)
        if not self.settings.gate or not comparisons:
            return []
        last = comparisons[-1]
        ref, cand = self.arms[0], self.arms[-1]
        name = f"a/b {cand.letter} vs {ref.letter}"
        covers = frozenset(r["nodeid"] for r in rows if r.get("arm"))
        for arm in (ref, cand):
            missing = uncovered(
                f"{name} ({arm.letter})",
                [r for r in rows if r.get("arm") == arm.letter],
                self.options.min_coverage,
            )
            if missing is not None:
                return [CoveredGate(name, False, missing.message, covers)]
        worse = worse_for_the_gate(last, self.options.alpha)
        tasks = len(last["tasks"])
        metrics = self.settings.metrics
        over = f"{tasks} tasks and overall" + (
            f" x {len(metrics)} metrics" if len(metrics) > 1 else ""
        )
        if self.stopping is not None:
            level = family_alpha(self.options.alpha, tasks, len(metrics))
            family = f"alpha {self.options.alpha} over {over}: {level:.3g} each"
        else:
            family = f"Holm at {self.options.alpha} over {over}"
        head = f"{name} ({cand.label} vs {ref.label}, paired on {', '.join(metrics)}, {family})"
        msg = f"{head}: " + (
            f"worse on {', '.join(worse)}"
            if worse
            else f"not worse on any of {tasks} tasks or overall"
        )
        return [CoveredGate(name, not worse, msg, covers)]

    def _write_plot(self, rows: list[Row]) -> None:
        """A sweep (every arm a checkpoint step): success per task vs training step."""
        if any(str(a.step) != a.label for a in self.arms):
            return
        try:
            from pytest_hud.evaluation.comparison import run_from_rows, write_plot

            runs = [
                run_from_rows([r for r in rows if r.get("arm") == a.letter], a.label)
                for a in self.arms
            ]
            path = self.hud.figure_path("sweep")
            write_plot(runs, path)
            self.plot = path
        except Exception as exc:  # matplotlib missing or the file cannot be written
            self.plot_error = f"hud sweep plot not written: {type(exc).__name__}: {exc}"

    @pytest.hookimpl
    def pytest_hud_html_figures(self) -> list[Figure]:
        if self.plot is None:
            return []
        return [Figure(self.plot, "success per task vs training step (Wilson 95%)")]

    @pytest.hookimpl
    def pytest_hud_results_meta(self) -> dict[str, object]:
        rows = list(self.hud.rows.values())
        return {
            "agents": agent_blocks(rows, self.describe(hashes=True)),
            "paired": {
                "reference": self.arms[0].letter,
                "candidate": self.arms[-1].letter,
                "order_seed": self.seed,
                "alpha": self.options.alpha,
                "metric": self.settings.metric,
                "metrics": self.settings.metrics,
                "min_coverage": self.options.min_coverage,
                "sequential": self.stopping is not None,
                "saved": self.stopping.saved() if self.stopping is not None else 0,
                "gate": self.settings.gate,
                "plot": None if self.plot is None else str(self.plot),
                "comparisons": self.comparisons(rows),
            },
        }

    @pytest.hookimpl
    def pytest_hud_summary_table(self, rows: list[Row]) -> list[str]:
        ref, cand = self.arms[0], self.arms[-1]
        title = (
            f"hud A/B: {len(self.arms)} agents ({ref.letter} reference, {cand.letter} "
            f"candidate) on {len(rows)} rollouts"
        )
        table = format_ab_table(
            rows, self.describe(), self.comparisons(rows), self.settings.metrics
        )
        return [title, *table]

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        tr = terminalreporter
        for entry in self.describe():
            role = f" ({entry['role']})" if entry["role"] else ""
            tr.write_line(f"hud arm {entry['arm']}: {entry['spec']}{role}")
        tr.write_line(f"hud A/B run order: --hud-ab-seed={self.seed}")
        if self.stopping is not None:
            decisions = self.stopping.decisions
            tr.write_line(f"hud paired sequential: {decisions.saved()} episodes saved")
            for task, reason in sorted(decisions.reasons.items()):
                tr.write_line(f"  {task}: {reason}; {decisions.saved(task)} episodes saved")
        if self.plot is not None:
            tr.write_line(f"hud sweep plot: {self.plot}")
        if self.plot_error is not None:
            tr.write_line(self.plot_error, red=True)

    @pytest.hookimpl
    def pytest_hud_html_sections(self, rows: list[Row]) -> list[str]:
        from pytest_hud.features.ab.html import arms_html

        return [arms_html(self.describe(), rows, self.comparisons(rows))] if rows else []


def enable(settings: Settings, hud: Hud) -> ArmsPlugin | None:
    """The feature's plugin for this session (several --hud-agent), else None."""
    return ArmsPlugin(settings, hud) if hud.arms else None
