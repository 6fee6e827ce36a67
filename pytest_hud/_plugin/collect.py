"""Collection: task files and ``@pytest.mark.hud`` rows become items; expectations mark
them xfail/skip; the evaluator learns each item's case and what comes next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_hud._plugin.cases import HudCase, expand, task_rows
from pytest_hud._plugin.expect import Expectations
from pytest_hud._plugin.internals import (
    binding_key,
    uses_fixture_from,
    xdist_interactor,
    xdist_upcoming,
)
from pytest_hud._plugin.items import TaskFile, is_task_file
from pytest_hud._plugin.module_rows import check_module_columns
from pytest_hud._plugin.row_check import check_rows
from pytest_hud._plugin.state import CASE, SessionState
from pytest_hud.runtime.errors import TaskError

__all__ = ["CollectMixin"]


class CollectMixin(SessionState):
    """The session's collection hooks' work."""

    def collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
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
            own = uses_fixture_from(metafunc.definition, "hud_provider", "pytest_hud.fixtures")
            check_rows(rows, self.options.runtime or "local", own_provider=own)
        except TaskError as exc:  # a collection error showing just its message
            raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: {exc}") from None
        group = int(marker.kwargs.get("group") or self.options.group)
        cases = expand(rows, group, self.options.seed)
        metafunc.parametrize("hud_task", cases, ids=[c.id for c in cases])

    def collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            callspec = getattr(item, "callspec", None)
            case = callspec.params.get("hud_task") if callspec is not None else None
            if not isinstance(case, HudCase):
                continue
            item.stash[CASE] = case
            self._apply_expectations(item, case)
            self.resume_item(item, case)
            if item.get_closest_marker("skip") is None:
                self.evaluator.register(item.nodeid, case, binding_key(item))
            if self.options.shared:  # keep a shared substrate's items on one xdist worker
                item.add_marker(pytest.mark.xdist_group(name=f"hud-{case.row.env}"))
        if self.baseline is not None:
            self._check_baseline_covers([item.stash[CASE] for item in items if CASE in item.stash])

    def collection_ordered(self, items: list[pytest.Item]) -> None:
        """After every plugin reordered the items: boot the first ones' substrates, then
        load the agent (both before any item runs; the boots run while it loads)."""
        if self.is_worker:  # the controller ran registry.preflight; a worker's UsageError
            return  # would crash xdist, so its items error (once loaded, never retried)
        self.prime(items)
        plugin_agent = "pytest_hud.fixtures"
        if any(CASE in i.stash and uses_fixture_from(i, "hud_agent", plugin_agent) for i in items):
            self.load_agent()

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
            and uses_fixture_from(i, "hud_provider", "pytest_hud.fixtures")
        ]
        if ours:
            self.evaluator.prime(self.default_provider(), ours)

    def prime_worker(self, item: pytest.Item) -> None:
        """pytest_runtest_setup on an xdist worker: prime for this item and the ones queued
        after it here, before the item's fixtures load the agent."""
        if not self.is_worker or self._primed or item.nodeid not in self.evaluator.cases:
            return
        by_id = {i.nodeid: i for i in item.session.items}
        upcoming = [by_id[n] for n in self.evaluator.schedule(item.nodeid) if n in by_id]
        self.prime([item, *upcoming])

    def _apply_expectations(self, item: pytest.Item, case: HudCase) -> None:
        rules = Expectations()
        rules.xfail.update(self.expect.xfail)
        rules.skip.update(self.expect.skip)
        for mark in item.iter_markers("hud_expect"):
            agent = mark.kwargs.get("agent")
            if agent in (None, "*", self.agent_label, self._agent_name):
                rules.merge(
                    {k: v for k, v in mark.kwargs.items() if k in ("xfail", "skip")},
                    f"{item.nodeid} @hud_expect",
                )
        hit = rules.match(case.row.env, case.row.slug, case.row.id)
        if hit is None:
            return
        kind, reason = hit
        if kind == "skip":
            item.add_marker(pytest.mark.skip(reason=f"[{self.agent_label}] {reason}"))
        else:
            item.add_marker(
                pytest.mark.xfail(
                    reason=f"[{self.agent_label}] {reason}", strict=True, raises=AssertionError
                )
            )

    def _check_baseline_covers(self, cases: list[HudCase]) -> None:
        assert self.baseline is not None
        have = {f"{c.row.env}/{c.row.id}" for c in cases}  # per_task is per env/template
        missing = sorted(set(self.baseline.get("per_task") or {}) - have)
        if have and missing and not have & set(self.baseline.get("per_task") or {}):
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
        self._order = [item.nodeid for item in session.items]
        index = {nid: i for i, nid in enumerate(self._order)}
        interactor = xdist_interactor(self.config)

        def upcoming(nodeid: str) -> list[str]:
            if interactor is not None:
                return xdist_upcoming(interactor, session)
            i = index.get(nodeid)
            return [] if i is None else self._order[i + 1 :]

        self.evaluator.schedule = upcoming
        self.lookahead_filter()

    def node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self._order:
            self._order = list(ids)
