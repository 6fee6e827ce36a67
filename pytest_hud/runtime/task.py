"""Task rows and tasksets: plain data naming an env, a template and args; the slug (id plus an
args hash) is the stable name in ids, results and expectations.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol, overload

from pytest_hud.errors import TaskError
from pytest_hud.plumbing.jsonread import loads
from pytest_hud.plumbing.jsonvalue import JSONValue
from pytest_hud.plumbing.loader import load_module

__all__ = [
    "RuntimeConfig",
    "Task",
    "TaskError",
    "TaskSource",
    "Taskset",
    "declare",
    "declared_sources",
    "memory_mib",
    "module_tasks",
    "sources_in",
    "without_args_hash",
]

_ROW_KEYS = {"env", "id", "args", "runtime_config", "metadata"}
#: hex digits of the args' hash a slug ends with (``id-1a2b3c4d``)
_HASH_DIGITS = 8
_ARGS_HASH = re.compile(rf"-[0-9a-f]{{{_HASH_DIGITS}}}$")


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b?)\s*$", re.IGNORECASE)
_MIB = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024}


def memory_mib(value: int | float | str | None) -> int | None:
    """``RuntimeConfig.memory`` in MiB (what the cloud SDKs and Ray take): a number is MiB;
    "512Mi", "4g", "4GB" are binary units."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return math.ceil(value)
    match = _MEMORY.match(str(value))
    if not match:
        raise ValueError(f"memory must be MiB or like '512Mi' / '4Gi' / '4g', got {value!r}")
    return math.ceil(float(match.group(1)) * _MIB[match.group(2).lower()])


@dataclass(frozen=True)
class RuntimeConfig:
    """Per-row placement hints: image, resources and limits (hashable, so it keys substrates)."""

    image: str | None = None
    gpu: str | None = None
    cpu: float | None = None
    memory: str | None = None
    timeout: float | None = None
    env: tuple[tuple[str, str], ...] = ()
    #: custom scheduler resources, e.g. ``{"libero": 1}`` (RayRuntime places by them)
    resources: tuple[tuple[str, float], ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | RuntimeConfig | None) -> RuntimeConfig | None:
        if data is None or isinstance(data, RuntimeConfig):
            return data
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise TaskError(
                f"runtime_config has unknown keys {sorted(unknown)}; known: {sorted(known)}"
            )
        kwargs = dict(data)
        if "env" in kwargs:
            kwargs["env"] = tuple(sorted((str(k), str(v)) for k, v in dict(kwargs["env"]).items()))
        if "resources" in kwargs:
            items = dict(kwargs["resources"]).items()
            kwargs["resources"] = tuple(sorted((str(k), float(v)) for k, v in items))
        return cls(**kwargs)

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value not in (None, ()):
                out[f.name] = dict(value) if f.name in ("env", "resources") else value
        return out


def _canonical(args: Mapping[str, object]) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True, eq=False)
class Task:
    """One row: ``Task(env, id, args)``; equal rows have equal slugs."""

    env: str
    id: str
    args: Mapping[str, JSONValue] = field(default_factory=dict)
    runtime_config: RuntimeConfig | None = None
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    #: the file declaring this row's env, when the row came from ``template.task(...)``:
    #: routing prefers it to a lookup by name (two imported modules may reuse a name)
    declared_in: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("env", "id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise TaskError(f"task field {name!r} must be a non-empty string, got {value!r}")
        if not isinstance(self.args, Mapping):
            raise TaskError(f"task field 'args' must be a mapping, got {type(self.args).__name__}")
        try:
            _canonical(self.args)
        except (TypeError, ValueError) as exc:
            raise TaskError(f"task field 'args' is not JSON-serializable: {exc}") from None
        object.__setattr__(self, "args", dict(self.args))
        object.__setattr__(self, "runtime_config", RuntimeConfig.from_dict(self.runtime_config))
        object.__setattr__(self, "metadata", dict(self.metadata))

    @functools.cached_property
    def slug(self) -> str:
        """``id`` alone for a row without args, else ``id-<8 hex of the args' hash>``."""
        if not self.args:
            return self.id
        digest = hashlib.sha256(_canonical(self.args).encode()).hexdigest()[:_HASH_DIGITS]
        return f"{self.id}-{digest}"

    @property
    def key(self) -> str:
        """``env/slug``: unique across a taskset mixing envs."""
        return f"{self.env}/{self.slug}"

    def with_args(self, **args: JSONValue) -> Task:
        return Task(
            self.env,
            self.id,
            {**self.args, **args},
            self.runtime_config,
            self.metadata,
            declared_in=self.declared_in,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and (self.key, self.runtime_config) == (
            other.key,
            other.runtime_config,
        )

    def __hash__(self) -> int:
        return hash((self.key, self.runtime_config))

    def to_row(self) -> dict[str, JSONValue]:
        row: dict[str, JSONValue] = {"env": self.env, "id": self.id, "args": dict(self.args)}
        if self.runtime_config is not None:
            row["runtime_config"] = self.runtime_config.to_dict()
        if self.metadata:
            row["metadata"] = dict(self.metadata)
        return row

    @classmethod
    def from_row(cls, row: object, where: str = "row") -> Task:
        """A row dict; unknown top-level keys become metadata columns."""
        if isinstance(row, Task):
            return row
        if not isinstance(row, Mapping):
            raise TaskError(f"{where}: a task row is a JSON object, got {type(row).__name__}")
        for name in ("env", "id"):
            if name not in row:
                raise TaskError(f"{where}: missing field {name!r} (a row needs env, id and args)")
        metadata = {k: v for k, v in row.items() if k not in _ROW_KEYS}
        metadata.update(row.get("metadata") or {})
        try:
            return cls(
                row["env"], row["id"], row.get("args") or {}, row.get("runtime_config"), metadata
            )
        except TaskError as exc:
            raise TaskError(f"{where}: {exc}") from None


def without_args_hash(slug: str) -> str:
    """The row id a slug names, its args' hash dropped (``id-1a2b3c4d`` -> ``id``); of a key,
    ``env/id``: what ids and reports that hold the slug alone are read back to."""
    return _ARGS_HASH.sub("", slug)


def _module_from(row: Task, folder: Path) -> Task:
    """``row`` with a relative ``module`` path read from its task file's ``folder`` when the
    file is there (else it stays relative to the current directory), so a task file runs
    the same from wherever pytest starts."""
    module = row.metadata.get("module")
    if not isinstance(module, str) or not module.endswith(".py") or Path(module).is_absolute():
        return row
    there = (folder / module).resolve()
    if not there.is_file():
        return row
    try:  # as the row's user would write it from here: relative where it can be
        text = str(there.relative_to(Path.cwd().resolve()))
    except ValueError:
        text = str(there)
    return replace(row, metadata={**row.metadata, "module": text})


class TaskSource(Protocol):
    """What declares task rows, as the rows see it: an ``Environment``. runtime/environment.py
    imports this module (its templates make Tasks), so the record of declared environments is
    kept here, by what :meth:`Taskset.from_module` reads of them; runtime/modules.py gives
    them back as Environments."""

    @property
    def tasks(self) -> Sequence[Task]: ...


_DECLARED: list[tuple[TaskSource, str | None]] = []
_IDS: set[int] = set()  # the registry holds each env, so an id is never reused


def declare(env: TaskSource, declared_in: str | None) -> None:
    """Record a newly constructed Environment and the file that declared it."""
    _DECLARED.append((env, declared_in))
    _IDS.add(id(env))


def declared_sources() -> list[tuple[TaskSource, str | None]]:
    """Every Environment constructed in this process, with the file that declared it."""
    return list(_DECLARED)


def sources_in(module: object) -> list[TaskSource]:
    """The Environments among a module's globals (possibly none)."""
    return [v for v in vars(module).values() if id(v) in _IDS]


def module_tasks(module: str | Path | object) -> tuple[list[Task], str | None]:
    """Every task a module's Environments declare, and the module's file (or name)."""
    mod = load_module(module) if isinstance(module, str | Path) else module
    tasks = [t for env in sources_in(mod) for t in env.tasks]
    return tasks, getattr(mod, "__file__", None) or getattr(mod, "__name__", None)


class Taskset(Sequence[Task]):
    """An ordered list of task rows with unique keys, and where it came from."""

    def __init__(self, tasks: Iterable[Task | Mapping[str, object]], source: str | None = None):
        self.source = source
        rows: list[Task] = []
        seen: dict[str, int] = {}
        for n, row in enumerate(tasks, 1):
            where = f"{source}: row {n}" if source else f"row {n}"
            task = Task.from_row(row, where)
            if task.key in seen:
                raise TaskError(
                    f"{where}: duplicate task {task.key!r} (same env, id and args as row "
                    f"{seen[task.key]}); give it different args or drop it"
                )
            seen[task.key] = n
            rows.append(task)
        self._tasks = rows

    @overload
    def __getitem__(self, i: int) -> Task: ...

    @overload
    def __getitem__(self, i: slice) -> list[Task]: ...

    def __getitem__(self, i: int | slice) -> Task | list[Task]:
        return self._tasks[i]

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def __repr__(self) -> str:
        return f"Taskset({len(self)} tasks, source={self.source!r})"

    @property
    def envs(self) -> list[str]:
        return list(dict.fromkeys(t.env for t in self._tasks))

    # -- files -------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Taskset:
        """Rows from ``.json`` (a list), ``.jsonl`` (a row per line) or a Python module."""
        path = Path(path)
        if path.suffix == ".py":
            return cls.from_module(path)
        if not path.exists():
            raise TaskError(f"{path}: no such task file")
        text = path.read_text()
        if path.suffix == ".jsonl":
            rows = []
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                try:
                    rows.append(Task.from_row(loads(line), f"{path}:{n}"))
                except json.JSONDecodeError as exc:
                    raise TaskError(f"{path}:{n}: not a JSON object ({exc.msg})") from None
            out = cls(rows, source=str(path))
        else:
            try:
                data = loads(text)
            except json.JSONDecodeError as exc:
                raise TaskError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
            if isinstance(data, Mapping) and "tasks" in data:
                data = data["tasks"]
            if not isinstance(data, list):
                raise TaskError(f"{path}: expected a JSON list of task rows")
            rows = [Task.from_row(row, f"{path}: row {n}") for n, row in enumerate(data, 1)]
            out = cls(rows, source=str(path))
        out._tasks = [_module_from(t, path.parent) for t in out._tasks]
        return out

    @classmethod
    def from_module(cls, module: str | Path | object) -> Taskset:
        """Every task the module's Environments declare (``template.task(...)`` calls)."""
        tasks, source = module_tasks(module)
        return cls(tasks, source=source)

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        rows = [t.to_row() for t in self._tasks]
        if path.suffix == ".jsonl":
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            path.write_text(json.dumps(rows, indent=2) + "\n")
        return path
