"""pytest-hud's hooks: options, markers, collection, reporting and gates.

Everything that does work lives elsewhere: options in ``pytest.options``, cases
in ``pytest.cases``, task files in ``pytest.items``, rollouts in
``pytest.evaluator``, aggregates in ``pytest.report``, fixtures in ``fixtures``.
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_hud.fixtures import hud_agent, hud_provider, hud_result, hud_task  # noqa: F401
from pytest_hud.pytest import report as rep
from pytest_hud.pytest.cases import HudCase, expand, task_rows
from pytest_hud.pytest.errors import EpisodeFailed
from pytest_hud.pytest.evaluator import Evaluator, make_provider
from pytest_hud.pytest.expect import Expectations, ExpectError
from pytest_hud.pytest.items import TaskFile, is_task_file
from pytest_hud.pytest.options import HudOptions, addoption
from pytest_hud.runtime.rollout import RolloutResult

PLUGIN = pytest.StashKey["HudPlugin"]()
RESULT = pytest.StashKey[RolloutResult]()
CASE = pytest.StashKey[HudCase]()


def pytest_addoption(parser: pytest.Parser) -> None:
    addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hud(tasks, min_success=None, group=None): evaluate the policy on task rows "
        "(Task objects, a Taskset, or a .json/.jsonl/.py path); each row is one item",
    )
    config.addinivalue_line(
        "markers",
        "hud_expect(agent=None, xfail=None, skip=None): task globs expected to fail or "
        "skipped, for one agent/checkpoint name or all",
    )
    plugin = HudPlugin(config, HudOptions.from_config(config))
    config.stash[PLUGIN] = plugin
    config.pluginmanager.register(plugin, "pytest-hud-session")
    if config.pluginmanager.hasplugin("html"):
        config.pluginmanager.register(HtmlHooks(plugin), "pytest-hud-html")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(PLUGIN, None)
    if plugin is not None:
        plugin.evaluator.close()


class HudPlugin:
    """Per-session state and the hooks that need it."""

    def __init__(self, config: pytest.Config, options: HudOptions) -> None:
        self.config = config
        self.options = options
        self.is_worker = hasattr(config, "workerinput")
        root = Path(str(config.rootpath))
        self.artifacts = root / ".hud"
        self.evaluator = Evaluator(options, self.artifacts)
        self._agent: Any = None
        self._agent_name = _validate_agent(options.agent)
        self.expect = self._load_expectations()
        self.baseline = self._load_baseline()
        self.rows: dict[str, dict[str, Any]] = {}
        self.other_failures = 0
        self.min_success: dict[str, float] = {}
        self.gates: list[rep.Gate] = []
        self._order: list[str] = []
        self.record_root: Path | None = None
        self.writers: dict[str, Any] = {}
        self.dataset: str | None = None
        self.recording_error: str | None = None
        if options.record is not None:
            self._setup_recording(options.record)

    # -- dataset recording --------------------------------------------------------------
    def _setup_recording(self, record: str) -> None:
        """``--hud-record``: lerobot must be there (one clear message, at configure time).
        One dataset per env (the root itself when the run has one env); each xdist worker
        records a part that the controller merges at the end."""
        import importlib.util

        if importlib.util.find_spec("lerobot") is None:
            raise pytest.UsageError(
                "--hud-record writes LeRobot v3 datasets and needs lerobot: install it with "
                "scripts/setup --lerobot (or .ci/install-lerobot .venv), or drop --hud-record"
            )
        root = Path(record or os.environ.get("RECORD_DIR") or "data").expanduser().absolute()
        if root.exists() and not root.is_dir():
            raise pytest.UsageError(f"--hud-record: {root} is a file; point it at a folder")
        self.record_root = root
        self.evaluator.observers.append(self._record_observer)

    def _dataset_root(self, env: str) -> Path:
        assert self.record_root is not None
        envs = {case.row.env for case in self.evaluator.cases.values()}
        return self.record_root if len(envs) <= 1 else self.record_root / env

    def _record_observer(self, run: Any, spaces: Any) -> Any:
        env = run.task.env
        writer = self.writers.get(env)
        if writer is None:
            from pytest_hud.robot.record.writer import DatasetWriter

            root = self._dataset_root(env)
            if self.is_worker:
                root = _parts_dir(root) / self.config.workerinput["workerid"]  # type: ignore[attr-defined]
            writer = self.writers[env] = DatasetWriter(root)
        return writer.observer(run, spaces)

    def _finish_recording(self) -> None:
        if self.record_root is None:
            return
        for writer in self.writers.values():
            writer.finalize()
        if self.is_worker:
            return
        envs = sorted({row["env"] for row in self.rows.values()})
        finals = {env: self._dataset_root(env) for env in envs} if self.evaluator.cases else {}
        if not finals:  # the controller under xdist collects nothing: derive from the rows
            single = len(envs) <= 1
            finals = {env: self.record_root if single else self.record_root / env for env in envs}
        done = []
        for env, final in finals.items():
            parts_dir = _parts_dir(final)
            if parts_dir.exists():
                self._merge_parts(env, parts_dir, final)
            if (final / "meta" / "info.json").exists():
                done.append(str(final))
        if done:
            self.dataset = done[0] if len(done) == 1 else str(self.record_root)

    def _merge_parts(self, env: str, parts_dir: Path, final: Path) -> None:
        import shutil

        from pytest_hud.robot.record.merge import merge_datasets

        rows = [r for r in self.rows.values() if r["env"] == env]
        first: dict[str, int] = {}
        for row in rows:  # parts in the order of each worker's first test
            ds = row.get("dataset") or {}
            if ds.get("episode_index") is not None:
                pos = self._position(row["nodeid"])
                first[ds["root"]] = min(first.get(ds["root"], pos), pos)
        parts = sorted(
            (p for p in parts_dir.iterdir() if p.is_dir()),
            key=lambda p: (first.get(str(p), 1 << 30), p.name),
        )
        offsets: dict[str, int] = {}
        total = 0
        for part in parts:
            info = part / "meta" / "info.json"
            if info.exists():
                offsets[str(part)] = total
                total += int(json.loads(info.read_text()).get("total_episodes") or 0)
        if total:
            merge_datasets(parts, final)
        for row in rows:  # point every row at its episode in the merged dataset
            ds = row.get("dataset") or {}
            if ds.get("root") in offsets and ds.get("episode_index") is not None:
                ds["part"], ds["root"] = ds["root"], str(final)
                ds["episode_index"] = offsets[ds["part"]] + int(ds["episode_index"])
        shutil.rmtree(parts_dir, ignore_errors=True)

    def _merged_root(self, row: dict[str, Any]) -> str | None:
        """In an xdist worker, the dataset its part will be merged into."""
        if not self.is_worker or self.record_root is None or not row.get("dataset"):
            return None
        return str(self._dataset_root(row["env"]))

    def _position(self, nodeid: str) -> int:
        try:
            return self._order.index(nodeid)
        except ValueError:
            return len(self._order)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self._order:
            self._order = list(ids)

    # -- the session's agent and provider ------------------------------------------------
    @property
    def agent(self) -> Any:
        if self._agent is None:
            from pytest_hud.robot.agent.registry import AgentSpecError, load_agent

            spec = self.options.agent
            if spec == "random" and self.options.seed is not None:
                spec = f"random:{self.options.seed}"  # reproducible with --hud-seed
            try:
                self._agent = load_agent(spec)
            except AgentSpecError as exc:
                raise pytest.UsageError(str(exc)) from None
        return self._agent

    def progress_line(self) -> Any:
        """A live ``[123 steps, 4.2s]`` after the test id, in ``-v`` on a terminal only;
        erased before pytest writes the outcome, so its output stays intact."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None or self.is_worker or self.config.option.verbose < 1:
            return None
        tw = tr._tw
        if not getattr(tr, "isatty", False):
            return None
        shown = [0]

        def show(steps: int, seconds: float) -> None:
            text = f" [{steps} steps, {seconds:.0f}s]"
            tw.write("\b" * shown[0] + text + " " * max(0, shown[0] - len(text)))
            pad = max(0, shown[0] - len(text))
            tw.write("\b" * pad)
            shown[0] = len(text)
            tw.flush()

        def erase() -> None:
            if shown[0]:
                tw.write("\b" * shown[0] + " " * shown[0] + "\b" * shown[0])
                shown[0] = 0

        show.erase = erase  # type: ignore[attr-defined]
        return show

    def default_provider(self) -> Any:
        return make_provider(self.options.runtime, self.options.shared)

    @property
    def agent_label(self) -> str:
        return self.options.checkpoint or self._agent_name

    def _load_expectations(self) -> Expectations:
        if self.options.expect is None:
            return Expectations()
        try:
            return Expectations.load(
                self.options.expect, [self.options.checkpoint or "", self._agent_name]
            )
        except ExpectError as exc:
            raise pytest.UsageError(str(exc)) from None

    def _load_baseline(self) -> dict[str, Any] | None:
        if self.options.baseline is None:
            return None
        try:
            return rep.load_baseline(self.options.baseline)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None

    # -- collection -----------------------------------------------------------------------
    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
        if is_task_file(file_path):
            return TaskFile.from_parent(parent, path=file_path)
        return None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        marker = metafunc.definition.get_closest_marker("hud")
        if marker is None:
            return
        source = marker.kwargs.get("tasks", marker.args[0] if marker.args else None)
        if source is None:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.hud needs tasks=")
        base = Path(str(metafunc.definition.path)).parent
        try:
            rows = task_rows(source, base)
        except (ValueError, OSError) as exc:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: {exc}") from None
        group = int(marker.kwargs.get("group") or self.options.group)
        cases = expand(rows, group, self.options.seed)
        if "min_success" in marker.kwargs and marker.kwargs["min_success"] is not None:
            self.min_success[metafunc.definition.nodeid] = float(marker.kwargs["min_success"])
        metafunc.parametrize("hud_task", cases, ids=[c.id for c in cases])

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            callspec = getattr(item, "callspec", None)
            case = callspec.params.get("hud_task") if callspec is not None else None
            if not isinstance(case, HudCase):
                continue
            item.stash[CASE] = case
            self._apply_expectations(item, case)
            if item.get_closest_marker("skip") is None:
                self.evaluator.register(item.nodeid, case, binding_key(item))
            if self.options.shared:  # keep a shared substrate's items on one xdist worker
                item.add_marker(pytest.mark.xdist_group(name=f"hud-{case.row.env}"))
        if self.baseline is not None:
            self._check_baseline_covers([item.stash[CASE] for item in items if CASE in item.stash])

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
        have = {c.row.key for c in cases}
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

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._order = [item.nodeid for item in session.items]
        index = {nid: i for i, nid in enumerate(self._order)}
        interactor = _xdist_interactor(self.config)

        def upcoming(nodeid: str) -> list[str]:
            if interactor is not None:
                return _xdist_upcoming(interactor, session)
            i = index.get(nodeid)
            return [] if i is None else self._order[i + 1 :]

        self.evaluator.schedule = upcoming

    # -- reporting ------------------------------------------------------------------------
    def attach(self, item: pytest.Item, result: RolloutResult) -> None:
        item.stash[RESULT] = result

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        result = item.stash.get(RESULT, None)
        case = item.stash.get(CASE, None)
        if result is None or case is None:
            return report
        if call.when == "call" or (call.when == "setup" and report.failed):
            row = self._row(item, case, result, report)
            report.hud = row
            props = [
                (f"hud.{k}", row[k])
                for k in ("key", "agent", "score", "success", "steps", "duration", "total_reward")
            ]
            props.append(("hud.seed", case.seed))
            if row.get("video"):
                props.append(("hud.video", row["video"]))
            if row.get("dataset"):
                props.append(("hud.dataset", json.dumps(row["dataset"])))
            item.user_properties.extend(props)
            report.user_properties = list(item.user_properties)
            extras = _html_extras(row, self._merged_root(row))
            if extras:
                report.extras = [*getattr(report, "extras", []), *extras]
        return report

    def _row(
        self, item: pytest.Item, case: HudCase, result: RolloutResult, report: pytest.TestReport
    ) -> dict[str, Any]:
        if report.when == "setup":
            outcome = "xfailed" if hasattr(report, "wasxfail") else "error"
        elif hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        else:
            outcome = report.outcome
        info = result.agent_info
        return {
            "nodeid": item.nodeid,
            "group": item.nodeid.split("[", 1)[0],
            "key": case.row.key,
            "env": case.row.env,
            "task_id": case.row.id,
            "slug": case.row.slug,
            "args": dict(case.task.args),
            "rep": case.rep,
            "seed": case.seed,
            "agent": self.agent_label,
            "outcome": outcome,
            "score": result.score,
            "success": result.success,
            "total_reward": result.total_reward,
            "steps": result.steps,
            "duration": round(result.duration, 3),
            "prompt": result.prompt,
            "error": result.error.splitlines()[0] if result.error else None,
            "error_type": result.error_type,
            "phase": result.phase,
            "infer_s": info.get("infer_s"),
            "env_s": info.get("env_s"),
            "video": info.get("video"),
            "dataset": info.get("dataset"),
        }

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = getattr(report, "hud", None)
        if row is not None:
            self.rows[report.nodeid] = row
        if report.failed and not (
            row is not None
            and row["outcome"] == "failed"
            and row["error"] is None
            and report.when == "call"
        ):
            self.other_failures += 1

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or not self.rows:
            return
        tr = terminalreporter
        tr.write_sep("=", f"hud: {self.agent_label} on {len(self.rows)} rollouts")
        for line in rep.format_table(list(self.rows.values())):
            tr.write_line(line)
        for gate in self.gates:
            tr.write_line(
                ("PASSED " if gate.passed else "FAILED ") + gate.message,
                green=gate.passed,
                red=not gate.passed,
                bold=not gate.passed,
            )
        if self.options.results is not None:
            tr.write_line(f"hud results: {self.options.results}")
        if self.dataset is not None:
            tr.write_line(f"hud dataset: {self.dataset}")
        if self.recording_error is not None:
            tr.write_line(f"FAILED {self.recording_error}", red=True, bold=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.evaluator.close()
        try:
            self._finish_recording()
        except Exception as exc:  # a dataset that cannot be written fails the session
            self.recording_error = f"recording failed: {type(exc).__name__}: {exc}"
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.is_worker:
            return
        rows = list(self.rows.values())
        self.gates = self._gates(rows)
        if self.options.results is not None:
            doc = rep.results_document(
                rows,
                gates=self.gates,
                meta={
                    "agent": self.agent_label,
                    "runtime": self.options.runtime,
                    "group": self.options.group,
                    "seed": self.options.seed,
                    "dataset": self.dataset,
                },
            )
            self.options.results.parent.mkdir(parents=True, exist_ok=True)
            self.options.results.write_text(json.dumps(doc, indent=2, default=str))
        if not self.gates:
            return
        if not all(g.passed for g in self.gates):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif (
            exitstatus == pytest.ExitCode.TESTS_FAILED
            and self.other_failures == 0
            and self.recording_error is None
        ):
            # every failure was an episode failure and the success gates cleared
            session.exitstatus = pytest.ExitCode.OK

    def _gates(self, rows: list[dict[str, Any]]) -> list[rep.Gate]:
        gates = []
        mode = self.options.gate
        if self.options.min_success is not None:
            gates.append(rep.threshold_gate("overall", rows, self.options.min_success, mode))
        for group, threshold in sorted(self.min_success.items()):
            mine = [r for r in rows if r["group"] == group]
            if mine:
                gates.append(rep.threshold_gate(group, mine, threshold, mode))
        if self.baseline is not None:
            gates.extend(rep.baseline_gates(rows, self.baseline))
        return gates

    # -- xdist ---------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """With ``--dist load``: when recording, contiguous blocks (so the merged dataset
        follows the test order); with concurrency > 1, queues at least as deep as the
        concurrency so each worker's lookahead has items to start."""
        if config.getoption("dist", "no") != "load":
            return None
        from pytest_hud.pytest.scheduling import HudBlockScheduling, HudLoadScheduling

        if self.options.record is not None:  # parts concatenate into test order
            return HudBlockScheduling(config, log)
        if self.options.concurrency < 2:
            return None
        return HudLoadScheduling(config, log, width=self.options.concurrency)


def _parts_dir(root: Path) -> Path:
    """Where xdist workers record their parts before the controller merges them."""
    return root.parent / f".{root.name}.parts"


def _validate_agent(spec: str) -> str:
    from pytest_hud.robot.agent.registry import BUILTINS, _entry_points, available_agents

    name = spec.partition(":")[0]
    if name in BUILTINS or spec in _entry_points() or ":" in spec:
        return spec
    raise pytest.UsageError(
        f"unknown --hud-agent {spec!r}; valid forms: {', '.join(available_agents())}"
    )


def _xdist_interactor(config: pytest.Config) -> Any:
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


def _xdist_upcoming(interactor: Any, session: pytest.Session) -> list[str]:
    """Items this worker has been handed but not started (xdist's queue, read-only)."""
    try:
        indices = [interactor.nextitem_index]
        with interactor.torun.lock() as queued:
            indices.extend(queued)
        return [session.items[i].nodeid for i in indices if isinstance(i, int)]
    except Exception:  # xdist internals moved: no lookahead, still correct
        return []


def binding_key(item: pytest.Item) -> tuple[Any, ...]:
    """Equal for items whose ``hud_provider`` and ``hud_agent`` fixtures resolve to the
    same objects: the same fixture definitions, cached in the same scope instance."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    module = item.nodeid.split("::")[0]
    klass = item.getparent(pytest.Class)
    scopes = {
        "session": "",
        "package": str(item.path.parent),
        "module": module,
        "class": klass.nodeid if klass is not None else module,
    }
    key: list[Any] = []
    for name in ("hud_provider", "hud_agent"):
        chain = defs.get(name) or ()
        if not chain:
            key.append(None)
            continue
        fixturedef = chain[-1]
        key.append((id(fixturedef), scopes.get(fixturedef.scope, item.nodeid)))
    return tuple(key)


def _html_extras(row: dict[str, Any], merged_root: str | None = None) -> list[dict[str, Any]]:
    try:
        from pytest_html import extras
    except ImportError:
        return []
    out = []
    video = row.get("video")
    if video and os.path.exists(video):
        data = base64.b64encode(Path(video).read_bytes()).decode()
        out.append(extras.image(data, name="episode", mime_type="image/gif", extension="gif"))
    dataset = row.get("dataset")
    if dataset and merged_root is not None:  # an xdist worker: the index changes at the merge
        out.append(extras.url(merged_root, name="dataset (episode index: --hud-results)"))
    elif dataset:
        name = f"dataset episode {dataset.get('episode_index')}"
        out.append(extras.url(str(dataset.get("root", "")), name=name))
    return out


class HtmlHooks:
    """pytest-html columns and summary (registered only when pytest-html is active)."""

    COLUMNS = ("Task", "Agent", "Score", "Success", "Steps", "Seconds")

    def __init__(self, plugin: HudPlugin) -> None:
        self.plugin = plugin

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[2:2] = [f'<th class="sortable" data-column-type="hud">{c}</th>' for c in self.COLUMNS]

    def pytest_html_results_table_row(self, report: Any, cells: list[str]) -> None:
        row = getattr(report, "hud", None) or {}

        def fmt(v: Any) -> str:
            if isinstance(v, float):
                return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"
            return "" if v is None else str(v)

        values = [
            row.get("key"),
            row.get("agent"),
            row.get("score"),
            row.get("success"),
            row.get("steps"),
            row.get("duration"),
        ]
        cells[2:2] = [f"<td>{html.escape(fmt(v))}</td>" for v in values]

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str]
    ) -> None:
        rows = list(self.plugin.rows.values())
        if not rows:
            return
        lines = rep.format_table(rows)
        gates = "".join(
            f"<p>{'PASSED' if g.passed else 'FAILED'}: {html.escape(g.message)}</p>"
            for g in self.plugin.gates or self.plugin._gates(rows)
        )
        prefix.append(
            f"<h2>hud: {html.escape(self.plugin.agent_label)}</h2>"
            f"<pre>{html.escape(chr(10).join(lines))}</pre>{gates}"
        )


__all__ = ["CASE", "PLUGIN", "RESULT", "EpisodeFailed", "HudPlugin"]
