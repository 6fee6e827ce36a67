"""Collection: task files and ``@pytest.mark.hud`` rows become items; expectations mark
them xfail/skip, ``pytest_hud_skip_case`` skips cases a feature decided (resumed ones);
the evaluator learns each item's case and what comes next."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.cases import HudCase, expand, task_rows, with_arms
from pytest_hud._plugin.expect import Expectations
from pytest_hud._plugin.internals import (
    OUR_FIXTURES,
    binding_key,
    uses_fixture_from,
    xdist_interactor,
    xdist_upcoming,
)
from pytest_hud._plugin.items import TaskFile, is_task_file
from pytest_hud._plugin.module_rows import check_module_columns
from pytest_hud._plugin.row_check import check_rows
from pytest_hud._plugin.state import CASE
from pytest_hud.errors import TaskError

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["Collector"]


class Collector:
    """The session's collection hooks' work."""

    def __init__(self, session: HudSession) -> None:
        self.session = session
        self.config = session.config
        self.options = session.options
        self.evaluator = session.evaluator
        self._primed = False  # the first items' substrates were booted ahead

    def collect_file(self, file_path: Path, parent: pytest.Collector) -> TaskFile | None:
        if is_task_file(file_path):
            return TaskFile.from_parent(parent, path=file_path)
        return None

    def generate_tests(self, metafunc: pytest.Metafunc) -> None:
        marker = metafunc.definition.get_closest_marker("hud")
        if marker is None:
            return
        source = marker.kwargs.get("tasks", marker.args[0] if marker.args else None)
        if source is None:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.hud needs tasks=")
        base = Path(str(metafunc.definition.path)).parent
        try:
            rows = task_rows(source, base)
            folder = (base / source).parent if isinstance(source, str | Path) else base
            roots = (Path(str(self.config.rootpath)), base, folder)
            check_module_columns(rows, str(source), roots, self.options.allow_modules)
        except (ValueError, OSError) as exc:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: {exc}") from None
        try:
            own = uses_fixture_from(metafunc.definition, "hud_provider", OUR_FIXTURES)
            check_rows(rows, self.options.runtime, own_provider=own)
        except TaskError as exc:  # a collection error showing just its message
            raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: {exc}") from None
        group = int(marker.kwargs.get("group") or self.options.group)
        cases = with_arms(expand(rows, group, self.options.seed), self.session.arms)
        metafunc.parametrize("hud_task", cases, ids=[c.id for c in cases])

    def collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            callspec = getattr(item, "callspec", None)
            case = callspec.params.get("hud_task") if callspec is not None else None
            if not isinstance(case, HudCase):
                continue
            item.stash[CASE] = case
            self._apply_expectations(item, case)
            reason = self.config.hook.pytest_hud_skip_case(
                config=self.config, nodeid=item.nodeid, case=case
            )
            if reason is not None:  # e.g. resumed: no rollout starts for it
                item.add_marker(pytest.mark.skip(reason=reason))
            if item.get_closest_marker("skip") is None:
                self.evaluator.register(item.nodeid, case, binding_key(item))
            if self.options.shared:  # keep a shared substrate's items on one xdist worker
                item.add_marker(pytest.mark.xdist_group(name=f"hud-{case.row.env}"))
        cases = [item.stash[CASE] for item in items if CASE in item.stash]
        if self.session.baseline is not None:
            self._check_baseline_covers(cases)
        if cases and not self.config.option.keyword and not self.config.option.markexpr:
            self._warn_unmatched(cases)

    def _warn_unmatched(self, cases: list[HudCase]) -> None:
        """One warning per ``--hud-expect`` glob no collected row matches (a glob written
        against the test id, ``[seed=1]``, silently matched nothing)."""
        rows = {(c.row.env, c.row.slug, c.row.id) for c in cases}
        for kind, glob in self.session.expect.unmatched(rows):
            warnings.warn(
                f"--hud-expect {self.options.expect}: {kind} glob {glob!r} matches no "
                "collected row; globs match a row's env/task_id or env/slug (e.g. "
                f"{cases[0].row.env}/{cases[0].row.id}), not its test id's args",
                UserWarning,
                stacklevel=1,
            )

    def collection_ordered(self, items: list[pytest.Item]) -> None:
        """After every plugin reordered the items: boot the first ones' substrates, then
        load the agent (both before any item runs; the boots run while it loads)."""
        if self.session.is_worker:  # the controller ran registry.preflight; a worker's
            return  # UsageError would crash xdist, so its items error (once loaded, never retried)
        self.prime(items)
        if any(CASE in i.stash and uses_fixture_from(i, "hud_agent", OUR_FIXTURES) for i in items):
            self.session.load_agent()
            armed = {i.stash[CASE].arm for i in items if CASE in i.stash}
            for arm in self.session.arms:  # the arms with items here, once each
                if arm in armed:
                    self.session.load_agent(arm.spec)

    def prime(self, items: list[pytest.Item]) -> None:
        """Boot the plugin provider's substrates for the first of ``items`` that use it,
        in the background (:meth:`Evaluator.prime`); once a session. An xdist worker primes
        at its first item's setup, before its fixtures load the agent."""
        if self._primed:
            return
        self._primed = True
        ours = [
            i.nodeid
            for i in items
            if i.nodeid in self.evaluator.cases
            and uses_fixture_from(i, "hud_provider", OUR_FIXTURES)
        ]
        if ours:
            self.evaluator.prime(self.session.default_provider(), ours)

    def setup(self, item: pytest.Item) -> None:
        """pytest_runtest_setup: skip a case a feature decided since collection (a decided
        sequential task); on an xdist worker, prime for this item and the ones queued after
        it here, before the item's fixtures load the agent."""
        case = self.evaluator.cases.get(item.nodeid)
        if case is None:
            return
        reason = self.config.hook.pytest_hud_skip_case(
            config=self.config, nodeid=item.nodeid, case=case
        )
        if reason is not None:
            pytest.skip(reason)
        if not self.session.is_worker or self._primed:
            return
        by_id = {i.nodeid: i for i in item.session.items}
        upcoming = [by_id[n] for n in self.evaluator.schedule(item.nodeid) if n in by_id]
        self.prime([item, *upcoming])

    def _apply_expectations(self, item: pytest.Item, case: HudCase) -> None:
        rules = Expectations()
        expect, label, name = self.session.expect, self.session.agent_label, self.session.agent_name
        if case.arm is not None:  # several agents: this arm's tables and names
            expect = self.session.arm_expect[case.arm.letter]
            label, name = case.arm.label, case.arm.spec.text
        rules.xfail.update(expect.xfail)
        rules.skip.update(expect.skip)
        for mark in item.iter_markers("hud_expect"):
            agent = mark.kwargs.get("agent")
            if agent in (None, "*", label, name):
                rules.merge(
                    {k: v for k, v in mark.kwargs.items() if k in ("xfail", "skip")},
                    f"{item.nodeid} @hud_expect",
                )
        hit = rules.match(case.row.env, case.row.slug, case.row.id)
        if hit is None:
            return
        kind, reason = hit
        if kind == "skip":
            item.add_marker(pytest.mark.skip(reason=f"[{label}] {reason}"))
        else:
            item.add_marker(
                pytest.mark.xfail(reason=f"[{label}] {reason}", strict=True, raises=AssertionError)
            )

    def _check_baseline_covers(self, cases: list[HudCase]) -> None:
        baseline = self.session.baseline
        assert baseline is not None
        have = {f"{c.row.env}/{c.row.id}" for c in cases}  # per_task is per env/template
        missing = sorted(set(baseline.get("per_task") or {}) - have)
        if have and missing and not have & set(baseline.get("per_task") or {}):
            raise pytest.UsageError(
                f"--hud-baseline {self.options.baseline} is from another taskset: none of its "
                f"tasks were collected; it has e.g. {missing[:5]}"
            )
        if missing and not self.config.option.keyword and not self.config.option.markexpr:
            raise pytest.UsageError(
                f"--hud-baseline {self.options.baseline} has tasks this run does not collect: "
                f"{missing[:10]}{' ...' if len(missing) > 10 else ''}; compare against a "
                "baseline of the same taskset (or select with -k)"
            )

    def collection_finish(self, session: pytest.Session) -> None:
        order = self.session.order = [item.nodeid for item in session.items]
        index = {nid: i for i, nid in enumerate(order)}
        interactor = xdist_interactor(self.config)

        def upcoming(nodeid: str) -> list[str]:
            if interactor is not None:
                return xdist_upcoming(interactor, session)
            i = index.get(nodeid)
            return [] if i is None else order[i + 1 :]

        self.evaluator.schedule = upcoming

    def node_collection_finished(self, node: object, ids: list[str]) -> None:
        if not self.session.order:
            self.session.order = list(ids)
