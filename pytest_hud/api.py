"""``pytest_hud.evaluate``: the plugin's evaluation from Python, as one in-process pytest session
(same numbers as the command). The caller's agent goes through a hook, never pickled.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_hud._plugin.module_rows import check_module_columns
from pytest_hud.errors import HudError
from pytest_hud.evaluation.document import ResultsDocument
from pytest_hud.forkserver import client as forkserver
from pytest_hud.runtime.backends import DEFAULT
from pytest_hud.runtime.modules import declared_environments
from pytest_hud.runtime.task import Task, Taskset

__all__ = ["EvaluationError", "Results", "TaskResult", "evaluate"]

_TEST = """\
import json
from pathlib import Path

import pytest

from pytest_hud import Task

ROWS = [Task.from_row(r) for r in json.loads(Path(__file__).with_suffix(".json").read_text())]


@pytest.mark.hud(tasks=ROWS)
def test_rows(hud_result):
    assert hud_result.success, hud_result.summary()
"""


#: exit codes of a session that did not evaluate: a usage or collection error, no items
_BROKEN = (
    pytest.ExitCode.INTERRUPTED,
    pytest.ExitCode.INTERNAL_ERROR,
    pytest.ExitCode.USAGE_ERROR,
    pytest.ExitCode.NO_TESTS_COLLECTED,
)


class EvaluationError(HudError, RuntimeError):
    """The session could not evaluate (a usage error, nothing collected, no results)."""


@dataclass(frozen=True)
class TaskResult:
    """One task's aggregate, as the results JSON's ``per_task`` holds it."""

    episodes: int
    successes: int
    success_rate: float | None
    wilson_95: tuple[float, float] | None
    mean_score: float | None
    mean_steps: float | None
    errors: int
    rate_ci: tuple[float, float] | None = None  # rows as the units (Wilson with one per row)
    score_ci: tuple[float, float] | None = None
    coverage: float | None = None  # scored / attempted

    @classmethod
    def of(cls, st: Mapping[str, Any]) -> TaskResult:
        def pair(key: str) -> tuple[float, float] | None:
            value = st.get(key)
            return None if not value else (float(value[0]), float(value[1]))

        return cls(
            episodes=int(st.get("episodes") or 0),
            successes=int(st.get("successes") or 0),
            success_rate=st.get("success_rate"),
            wilson_95=pair("wilson_95"),
            mean_score=st.get("mean_score"),
            mean_steps=st.get("mean_steps"),
            errors=int(st.get("errors") or 0),
            rate_ci=pair("rate_ci"),
            score_ci=pair("score_ci"),
            coverage=st.get("coverage"),
        )


@dataclass
class Results:
    """What one evaluation gave: the overall and per-task aggregates, the gates' verdicts
    and the session's exit code, with the whole results document in ``document``."""

    exit_code: int
    overall: TaskResult
    per_task: dict[str, TaskResult]
    gates: dict[str, bool]
    document: ResultsDocument = field(repr=False)
    path: Path | None = None

    @property
    def passed(self) -> bool:
        """Whether the session's verdict passed (every gate; exit code 0)."""
        return self.exit_code == 0

    @property
    def success_rate(self) -> float | None:
        return self.overall.success_rate


class _Watch:
    """Notes a Ctrl-C inside the session (exit code 2 also means a collection error)."""

    interrupted = False

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # pytest's own Interrupted (collection errors, -x) subclasses KeyboardInterrupt
        self.interrupted = excinfo.type is KeyboardInterrupt


class _HeldAgent:
    """The caller's agent object, answered for ``--hud-agent=<spec>``."""

    def __init__(self, spec: str, agent: object) -> None:
        self.spec, self.agent = spec, agent

    def pytest_hud_agent(self, config: pytest.Config, spec: str) -> object | None:
        return self.agent if spec == self.spec else None


def _restore_imports(modules: dict[str, ModuleType], path: list[str], tmp: str) -> None:
    """Undo what the session's collection did to the import system: a ``conftest`` (or
    test module) it imported under a name the caller had is put back, its own conftests
    and generated modules are dropped, and ``sys.path`` is the caller's again."""
    for name in list(sys.modules):
        if name in modules:
            if sys.modules[name] is not modules[name]:
                sys.modules[name] = modules[name]
            continue
        where = str(getattr(sys.modules[name], "__file__", "") or "")
        if where.startswith(tmp) or name == "conftest" or name.rpartition(".")[2] == "conftest":
            del sys.modules[name]
    sys.path[:] = path


def _torch_threads() -> int | None:
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def _restore_torch_threads(before: int | None) -> None:
    """Put back the caller's torch thread count: an agent run in this process under an
    xdist worker gives torch that worker's share of the cores (robot.agent.lerobot)."""
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


def _module_of(env: str) -> str | None:
    for declared, where in declared_environments():
        if declared.name == env:
            return where
    return None


def _check_modules(tasks: Sequence[Task], allow: bool) -> None:
    """The module rule pytest applies to task files, for rows given as objects: a row's own
    ``module`` column (from a task file it was loaded from) must be a dotted name or a path
    in this project (the current folder) or beside a module this process declared its envs
    in, unless ``allow_modules=True``. Modules this process imported itself are its own."""
    declared = {str(Path(p).resolve()) for _, p in declared_environments() if p}
    mine = [t for t in tasks if t.metadata.get("module") and t.declared_in is None]
    roots = [Path.cwd(), *{Path(p).parent for p in declared}]
    check_module_columns(mine, "evaluate(tasks)", roots, allow, "pass allow_modules=True")


def _rows_file(tasks: Iterable[Task], folder: Path) -> Path:
    """A generated test module whose rows are ``tasks``, each naming its env's module."""
    rows = []
    for task in tasks:
        row = task.to_row()
        metadata = dict(task.metadata)  # the row's metadata column
        where = task.declared_in or _module_of(task.env)  # two envs may share a name
        if "module" not in metadata and where is not None:
            metadata["module"] = where
        if metadata:
            row["metadata"] = metadata
        rows.append(row)
    stem = f"test_hud_evaluate_{uuid.uuid4().hex[:8]}"  # never a module the caller has
    (folder / f"{stem}.json").write_text(json.dumps(rows))
    test = folder / f"{stem}.py"
    test.write_text(_TEST)
    (folder / "pytest.ini").write_text("[pytest]\n")
    return test


def _target(tasks: object, folder: Path, allow_modules: bool) -> tuple[list[str], list[str]]:
    """pytest arguments for ``tasks``: (positional targets, extra options). Rows given as
    objects are checked here (:func:`_check_modules`): the session runs them from a
    generated file in a temporary folder, where pytest's own check cannot see the project."""
    if isinstance(tasks, Taskset):
        tasks = list(tasks)
    if isinstance(tasks, Task):
        tasks = [tasks]
    if isinstance(tasks, str | Path):
        text = str(tasks)
        allow = ["--hud-allow-modules"] if allow_modules else []
        if Path(text).exists():
            return [text], allow
        return [text], ["--pyargs", *allow]  # a suite package, e.g. pytest_hud.suites.metaworld
    if isinstance(tasks, Sequence) and tasks and all(isinstance(t, Task) for t in tasks):
        _check_modules(tasks, allow_modules)
        test = _rows_file(tasks, folder)
        ini = ["-c", str(folder / "pytest.ini"), "--rootdir", str(folder)]
        return [str(test)], [*ini, "--import-mode=importlib", "--hud-allow-modules"]
    raise EvaluationError(
        f"tasks: expected Task rows, a Taskset, a path (.jsonl/.py/folder) or a suite "
        f"package name; got {type(tasks).__name__}"
    )


def evaluate(
    tasks: object,
    agent: object,
    *,
    runtime: str = DEFAULT,
    group: int | None = None,
    workers: int | None = None,
    concurrency: int | None = None,
    shared: int | None = None,
    seed: int | None = None,
    min_success: float | None = None,
    gate: str | None = None,
    results: str | Path | None = None,
    ledger: str | Path | None = None,
    record: str | Path | None = None,
    log: Sequence[str] = (),
    step: int | None = None,
    log_dir: str | Path | None = None,
    log_run: str | None = None,
    name: str | None = None,
    args: Sequence[str] = (),
    allow_modules: bool = False,
) -> Results:
    """Evaluate ``agent`` on ``tasks`` as ``pytest --hud-...`` would, and return its results.

    ``agent`` is a ``--hud-agent`` spec (``"lerobot:PATH"``, ``"zero"``) or an agent object
    (a RobotAgent, or anything the plugin accepts as one), run in this process; ``workers``
    (xdist) needs a spec, since each worker loads its own copy. ``log`` names trackers
    (``--hud-log``) that get the figures at ``step``; their offline stores go to ``log_dir``
    (default ``./.hud/trackers``) and ``log_run`` names one tracker run several calls add
    to. ``args`` are passed to pytest as they are (``["-x"]``, ``["--hud-timeout=600"]``).
    A row's ``module`` column (from a task file) must be a dotted name or a path in this
    project, as under pytest; ``allow_modules=True`` lifts that (``--hud-allow-modules``).
    """
    held: _HeldAgent | None = None
    if isinstance(agent, str):
        spec = agent
    else:
        if workers not in (None, 0, 1):
            raise EvaluationError(
                f"workers={workers} with an agent object: each xdist worker loads its own "
                "agent, and an object in this process cannot travel to them; pass a "
                "--hud-agent spec (e.g. 'lerobot:PATH'), or use concurrency= for batching"
            )
        spec = f"python:{name or type(agent).__name__}"
        held = _HeldAgent(spec, agent)
    with tempfile.TemporaryDirectory(prefix="pytest-hud-evaluate-") as tmp:
        folder = Path(tmp)
        targets, extra = _target(tasks, folder, allow_modules)
        out = Path(results) if results is not None else folder / "results.json"
        argv = [*targets, *extra, "-p", "no:cacheprovider", f"--hud-agent={spec}",
                f"--hud-runtime={runtime}", f"--hud-results={out}"]  # fmt: skip
        options: dict[str, object] = {
            "--hud-group": group, "--hud-concurrency": concurrency, "--hud-shared": shared,
            "--hud-seed": seed, "--hud-min-success": min_success, "--hud-gate": gate,
            "--hud-ledger": ledger, "--hud-record": record, "--hud-log-step": step,
            "--hud-log-run": log_run,
        }  # fmt: skip
        if log and log_dir is None:  # not under the session's rootdir: that may be `tmp`
            log_dir = Path.cwd() / ".hud" / "trackers"
        options["--hud-log-dir"] = log_dir
        argv += [f"{flag}={value}" for flag, value in options.items() if value is not None]
        argv += [f"--hud-log={name}" for name in log]
        if workers not in (None, 0):
            argv += ["-n", str(workers)]
        else:
            argv += ["-p", "no:xdist"]
        argv += list(args)
        watch = _Watch()
        modules, path, zygotes = dict(sys.modules), list(sys.path), forkserver.zygotes()
        torch_threads = _torch_threads()
        try:
            code = pytest.main(argv, plugins=[watch, *([held] if held is not None else [])])
        finally:
            forkserver.shutdown_new(zygotes)  # the sims' fork server ends with the session
            _restore_imports(modules, path, tmp)
            _restore_torch_threads(torch_threads)
        if watch.interrupted:
            raise KeyboardInterrupt
        if code in _BROKEN:
            raise EvaluationError(
                f"the evaluation did not run (pytest exit code {int(code)}: "
                f"{pytest.ExitCode(code).name}); its output above says why"
            )
        if not out.exists():
            raise EvaluationError(
                f"the evaluation wrote no results (pytest exit code {int(code)}: "
                f"{pytest.ExitCode(code).name}); its output above says why"
            )
        document = json.loads(out.read_text())
    return Results(
        exit_code=int(code),
        overall=TaskResult.of(document.get("overall") or {}),
        per_task={k: TaskResult.of(v) for k, v in (document.get("per_task") or {}).items()},
        gates={str(g.get("name")): bool(g.get("passed")) for g in document.get("gates") or []},
        document=document,
        path=Path(results) if results is not None else None,
    )
