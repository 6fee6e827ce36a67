"""``--hud-preflight=off|warn|strict``: each agent's policy against the envs, before any item
(the checks: :mod:`.checks`, also behind ``python -m pytest_hud check``). Hard mismatches are
usage errors (exit 4), soft ones a warning table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.feature_api import (
    OUR_FIXTURES,
    FeatureSettings,
    Hud,
    is_task_file,
    option,
    overriding_plugin,
    uses_fixture_from,
)

if TYPE_CHECKING:
    from pytest_hud.features.preflight.checks import Subject
    from pytest_hud.robot.agent.registry import AgentSpec
    from pytest_hud.robot.compat import Table
    from pytest_hud.runtime.task import Task

__all__ = ["MODES", "PreflightPlugin", "Settings", "enable"]

MODES = ("off", "warn", "strict")


def _mode(text: str) -> str:
    mode = text.strip().lower()
    if mode not in MODES:
        raise ValueError(f"is off, warn or strict, got {text!r}")
    return mode


class Settings(FeatureSettings):
    mode: str = option(
        "--hud-preflight",
        "before any item, set each agent's policy (a LeRobot checkpoint's features and "
        "stats, an openpi or vla-eval server's metadata) against each env's contract and "
        "run it for a few steps: off, warn (a hard mismatch is a usage error, the rest one "
        "warning table) or strict (warnings are usage errors too) (default: warn)",
        default="warn",
        choices=MODES,
        parse=_mode,
    )


class PreflightPlugin:
    """Registered on the controller (or the only process) unless ``--hud-preflight=off``."""

    def __init__(self, hud: Hud, mode: str) -> None:
        self.hud = hud
        self.config = hud.config
        self.mode = mode
        self.done: set[AgentSpec] = set()  # agents checked (once per distinct agent)
        self._controller_done = False

    # -- where it runs -------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        """Under xdist: the controller decides once the first worker collected, before
        any item is scheduled (a usage error here ends the session, workers torn down)."""
        if self._controller_done or self._skipped():
            return
        self._controller_done = True
        if _overridden(self.config, "hud_provider") or _overridden(self.config, "hud_agent"):
            return  # a conftest routes rows or builds agents its own way
        from pytest_hud.features.preflight.checks import subjects

        envs = [s for s in subjects(_task_file_rows(self.config)) if _collected(s.env, ids)]
        if not envs:
            return
        for spec in self._specs():  # the kinds the controller builds (the registry says)
            if spec.checked_in_controller:
                self._check(spec, envs)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Without xdist: the collected items' envs, the session's agent(s)."""
        if self.hud.distributed or self._skipped():
            return
        cases = {
            i.nodeid: case
            for i in session.items
            if (case := self.hud.case_of(i)) is not None
            and uses_fixture_from(i, "hud_agent", OUR_FIXTURES)
            and uses_fixture_from(i, "hud_provider", OUR_FIXTURES)
            and i.get_closest_marker("skip") is None
        }
        if not cases:
            return
        from pytest_hud.features.preflight.checks import first_rows

        envs = first_rows(c.task for c in cases.values())
        arms = {c.arm for c in cases.values()}
        for spec in self._specs():
            if any(a is None or a.spec == spec for a in arms):
                self._check(spec, envs)

    def _skipped(self) -> bool:
        """Nothing to check here: only collecting, or rollouts run elsewhere (delegated)."""
        return bool(self.config.option.collectonly) or not self.hud.options.boots_here

    def _specs(self) -> list[AgentSpec]:
        return list(dict.fromkeys(self.hud.options.agents))

    # -- the check -----------------------------------------------------------------------
    def _check(self, spec: AgentSpec, envs: list[Subject]) -> None:
        if spec in self.done:
            return
        self.done.add(spec)
        from pytest_hud.features.preflight.checks import check_agent
        from pytest_hud.runtime.placement import provider_for

        options = self.hud.options
        agent = self.hud.load_agent(spec)  # the session's own, loaded once per process
        provider = provider_for(options.runtime)
        tables = check_agent(agent, spec.text, envs, provider, max_steps=options.max_steps)
        self._decide(spec.text, tables)

    def _decide(self, spec: str, tables: list[Table]) -> None:
        hard = [t for t in tables if t.hard]
        soft = [t for t in tables if t.soft and not t.hard]
        off = "(--hud-preflight=off skips this check)"
        if self.config.option.verbose >= 1:  # -v: the envs that fit, one line each
            for table in tables:
                if not table.hard and not table.soft:
                    self._print(f"{table.title}: fits ({len(table.rows)} checks ok)", yellow=False)
        if hard or (soft and self.mode == "strict"):
            shown = hard + (soft if self.mode == "strict" else [])
            text = "\n\n".join(t.render() for t in shown)
            what = "cannot run on" if hard else "would run wrongly on (--hud-preflight=strict)"
            raise pytest.UsageError(f"--hud-agent={spec} {what} the env:\n{text}\n{off}")
        if soft:
            from pytest_hud.robot.compat import CompatWarning

            text = "\n\n".join(t.render() for t in soft)
            printed = self._print(text)
            rows = "; ".join(f"{r.feature}: {r.verdict}" for t in soft for r in t.soft)
            brief = f"--hud-agent={spec}: preflight warnings ({rows}), fixes in the table above"
            # recorded like a config-time warning: the warnings summary lists it, and
            # -W error::pytest_hud.robot.compat.CompatWarning makes it a usage error
            try:
                self.config.issue_config_time_warning(CompatWarning(brief if printed else text), 2)
            except CompatWarning:
                raise pytest.UsageError(f"{brief} (-W error)\n{text}") from None

    def _print(self, text: str, *, yellow: bool = True) -> bool:
        """``text`` on the terminal now, before any item (False: no terminal)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return False
        reporter.ensure_newline()
        reporter.write_line(text, yellow=yellow)
        return True


def _collected(env: str, ids: list[str]) -> bool:
    """Whether any collected node id is a case of ``env`` (case ids start ``env/``)."""
    mark = f"{env}/"
    for nodeid in ids:
        params = nodeid.partition("[")[2]
        if params.startswith(mark) or f"-{mark}" in params:
            return True
    return False


def _overridden(config: pytest.Config, fixture: str) -> bool:
    """Whether a conftest (or another plugin) defines ``fixture`` beside the plugin's."""
    return overriding_plugin(config, fixture) is not None


def _task_file_rows(config: pytest.Config) -> list[Task]:
    """The rows of the task files given on the command line (the controller collects none)."""
    from pytest_hud.runtime.task import Taskset

    rows: list[Task] = []
    for arg in config.args:
        path = Path(str(arg).split("::", 1)[0])
        if path.is_file() and is_task_file(path):
            try:
                rows.extend(Taskset.load(path))
            except Exception:  # collection reports a bad file, in the workers
                continue
    return rows


def enable(settings: Settings, hud: Hud) -> PreflightPlugin | None:
    """The feature's plugin for this session (--hud-preflight, on the controller), else None."""
    if hud.is_worker or settings.mode == "off":
        return None
    return PreflightPlugin(hud, settings.mode)
