"""The episode ledger: one JSON line per finished rollout, in the file when it is appended
(and one ``unrun`` line per row a session did not run, saying why: never an episode).

Each record is one ``write`` of a whole line on an ``O_APPEND`` file: after a SIGKILL the
file holds whole lines and at most one torn last line, which :func:`read` reports and
:class:`Ledger` cuts off before appending again. A thread of the ledger's own calls ``fsync``
behind the appends (one for all the records written since its last), so a power cut loses
at most that window and no rollout waits on the disk; ``sync`` and ``close`` wait for it."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Required, TypedDict, cast

from pytest_hud.errors import HudError
from pytest_hud.evaluation.provenance import CheckpointRef, Provenance
from pytest_hud.evaluation.results import ResultsDocument, Row, RowError, check_row
from pytest_hud.plumbing.jsonread import loads
from pytest_hud.plumbing.jsonvalue import JSONValue

__all__ = [
    "EpisodeRecord",
    "Ledger",
    "LedgerContents",
    "LedgerError",
    "LedgerWriteError",
    "ResumeIndex",
    "RunRecord",
    "TornLine",
    "UnrunRecord",
    "episode_record",
    "key",
    "merge",
    "read",
    "results",
    "resume_index",
    "unrun_record",
    "write_ledger",
]

VERSION = 1
#: an episode's identity (:func:`key`): JSON scalars, compared and hashed, never read
Key = tuple[object, ...]


class RunRecord(TypedDict):
    """A ledger's run line: the session's provenance, once, before its episodes."""

    kind: Literal["run"]
    v: int
    run: str  # the id its episodes refer to
    started: float
    provenance: Provenance | dict[str, JSONValue]  # {} where the session collected none


class EpisodeRecord(Row, total=False):
    """A ledger's episode line: a results row with the run it belongs to."""

    kind: Required[Literal["episode"]]
    v: Required[int]
    run: Required[str]
    finished: Required[float]
    checkpoint: Required[CheckpointRef | None]


class UnrunRecord(TypedDict):
    """A ledger's line for a row the session did not run: the row's identity (what
    :func:`key` reads) and why (``reason``: budget, decided, put off, quit, or skipped: the
    user's skip; ``detail``: pytest's words). Not an episode: readers counting episodes
    never see it."""

    kind: Literal["unrun"]
    v: int
    run: str
    at: float
    nodeid: str
    key: str | None
    seed: JSONValue
    rep: int | None
    agent: str | None
    arm: str | None
    reason: str
    detail: str


#: the kinds of line a ledger holds
KINDS = ("run", "episode", "unrun")


class LedgerError(HudError, ValueError):
    """A ledger line that is not a torn tail cannot be read."""


class LedgerWriteError(LedgerError):
    """A record could not be appended (a full disk); the ledger was cut back to whole lines."""


@dataclass(frozen=True)
class TornLine:
    """An unfinished last line (the writer died mid-write): where it starts and its bytes."""

    line: int
    offset: int
    size: int


@dataclass
class LedgerContents:
    runs: dict[str, RunRecord] = field(default_factory=dict)
    episodes: list[EpisodeRecord] = field(default_factory=list)
    #: rows a session did not run (the latest line of each key), never episodes
    unrun: list[UnrunRecord] = field(default_factory=list)
    torn: TornLine | None = None


def key(record: Mapping[str, object]) -> Key:
    """What makes two records the same episode, for resume and merge: the task
    (``env/slug``), seed, repeat, agent and checkpoint content hash. ``record`` is an
    episode record, or a probe with those fields alone."""
    ckpt = record.get("checkpoint")
    return (
        record.get("key"),
        record.get("seed"),
        record.get("rep"),
        record.get("agent"),
        ckpt.get("hash") if isinstance(ckpt, Mapping) else None,
    )


#: outcomes of a finished episode, which resume keeps (an ERROR is not an episode)
EPISODE_OUTCOMES = ("passed", "failed", "xfailed", "xpassed")


def is_episode(record: EpisodeRecord) -> bool:
    """Whether a record is a graded episode (pass or fail), not an infrastructure error."""
    return record.get("outcome") in EPISODE_OUTCOMES and not record.get("error")


@dataclass
class ResumeIndex:
    """What ``--hud-resume`` keeps: the graded episode of each key (the latest line wins),
    and the keys whose records are only errors or skips, which run again."""

    episodes: dict[Key, EpisodeRecord] = field(default_factory=dict)
    rerun: set[Key] = field(default_factory=set)


def resume_index(contents: LedgerContents) -> ResumeIndex:
    out = ResumeIndex()
    for rec in contents.episodes:
        k = key(rec)
        if is_episode(rec):
            out.episodes[k] = rec
            out.rerun.discard(k)
        elif k not in out.episodes:
            out.rerun.add(k)
    for unrun in contents.unrun:  # a row not run runs now, unless an episode of it is kept
        if key(unrun) not in out.episodes:
            out.rerun.add(key(unrun))
    return out


def episode_record(
    row: Row,
    *,
    run: str,
    checkpoint: str | None = None,
    checkpoint_hash: str | None = None,
) -> EpisodeRecord:
    """A ledger episode from a plugin results row (``report.hud``)."""
    ckpt: CheckpointRef | None = (
        None
        if checkpoint is None and checkpoint_hash is None
        else {"path": checkpoint, "hash": checkpoint_hash}
    )
    return {
        "kind": "episode",
        "v": VERSION,
        "run": run,
        "finished": time.time(),
        **row,
        "checkpoint": ckpt,
    }


def unrun_record(row: Row, *, run: str) -> UnrunRecord:
    """The ledger line of a row not run (``row['unrun']`` or a skip): why, not an episode."""
    return {
        "kind": "unrun",
        "v": VERSION,
        "run": run,
        "at": time.time(),
        "nodeid": row["nodeid"],
        "key": row.get("key"),
        "seed": row.get("seed"),
        "rep": row.get("rep"),
        "agent": row.get("agent"),
        "arm": row.get("arm"),
        "reason": str(row.get("unrun") or "skipped"),
        "detail": str(row.get("skip_reason") or ""),
    }


def _parse(raw: bytes, number: int, path: Path) -> RunRecord | EpisodeRecord | UnrunRecord:
    """One line's record; what is checked (the kind, the run id, an episode's row fields)
    is what makes it one: the rest is read as written."""
    try:
        rec = loads(raw)  # nested past MAX_DEPTH: a JSONDecodeError too
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LedgerError(
            f"{path} line {number}: expected one JSON object per line, got {raw[:60]!r} "
            f"({exc}); fix: only the last line may be torn, so this file was edited or "
            "written by something else"
        ) from None
    if not isinstance(rec, dict) or rec.get("kind") not in KINDS:
        raise LedgerError(
            f"{path} line {number}: expected a run, episode or unrun record, got {str(rec)[:60]}"
        )
    run = rec.get("run")
    if not isinstance(run, str) or not run.isprintable():  # shown as it is: no escapes
        raise LedgerError(
            f"{path} line {number}: field 'run': expected a run id (printable text), got "
            f"{json.dumps(run)[:60]}"
        )
    if rec["kind"] == "run":
        return cast(RunRecord, rec)
    if rec["kind"] == "unrun":
        if not isinstance(rec.get("reason"), str):
            raise LedgerError(f"{path} line {number}: field 'reason': expected a string")
        return cast(UnrunRecord, rec)
    try:
        check_row(rec, f"{path} line {number}")
    except RowError as exc:
        raise LedgerError(str(exc)) from None
    return cast(EpisodeRecord, rec)


def read(path: str | Path) -> LedgerContents:
    """Every whole record of a ledger; an unfinished last line is reported as ``torn``."""
    path = Path(path)
    data = path.read_bytes()
    out = LedgerContents()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    offset = 0
    for number, raw in enumerate(lines, 1):
        if raw.strip():
            rec = _parse(raw, number, path)
            if rec["kind"] == "run":
                out.runs[rec["run"]] = rec
            elif rec["kind"] == "unrun":
                out.unrun.append(rec)
            else:
                out.episodes.append(rec)
        offset += len(raw) + 1
    if tail:
        out.torn = TornLine(len(lines) + 1, offset, len(tail))
    return out


#: how much of a ledger :func:`_check_tail` holds at once
_CHUNK = 1 << 20


def _check_tail(path: Path) -> TornLine | None:
    """The torn last line of the ledger at ``path``, if any, after checking its last whole
    record: an append needs only the end of the file, so opening one parses one record
    however long the history (:func:`read` parses every line) and holds a chunk of it at a
    time, while a file that is not a ledger is still refused before anything is cut off."""
    with path.open("rb") as f:
        newlines = end = size = 0  # newlines counted; where the whole lines end; bytes
        while block := f.read(_CHUNK):
            found = block.count(b"\n")
            if found:
                newlines += found
                end = size + block.rindex(b"\n") + 1
            size += len(block)
        lo, tail = end, b""
        while lo > 0:  # back from the end until the last non-blank line's start is in view
            lo = max(0, lo - _CHUNK)
            f.seek(lo)
            tail = f.read(end - lo)
            if b"\n" in tail.rstrip():
                break
    body = tail.rstrip()
    if body:
        start = body.rfind(b"\n") + 1
        before = newlines - tail.count(b"\n")  # newlines ahead of the bytes in view
        _parse(body[start:], before + body.count(b"\n", 0, start) + 1, path)
    return None if end == size else TornLine(newlines + 1, end, size - end)


class Ledger:
    """Append-only writer. Opening a ledger whose last line is torn cuts that line off
    (``self.torn`` says what was cut), so the next record starts on a line of its own."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self.torn: TornLine | None = None if created else _check_tail(self.path)
        #: records appended through this writer
        self.records = 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if self.torn is not None:
            os.ftruncate(self._fd, self.torn.offset)
            os.fsync(self._fd)
        if created:  # make the new name itself durable
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self._lock = threading.Condition()
        self._written = 0  # records in the file (the page cache)
        self._synced = 0  # of those, the ones fsync'd
        self._sync_error: OSError | None = None
        self._syncer: threading.Thread | None = None
        self._closing = False

    def append(self, record: RunRecord | EpisodeRecord | UnrunRecord) -> None:
        """Write one record as one line (fsync'd behind, by the ledger's thread)."""
        if record.get("kind") not in KINDS:
            raise LedgerError(
                f"expected a record with kind run, episode or unrun, got {record!r:.80}"
            )
        line = (json.dumps(record, default=str, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd < 0:
                raise LedgerError(f"{self.path}: ledger is closed")
            size = os.fstat(self._fd).st_size
            try:
                if self._sync_error is not None:  # the disk refused an earlier record
                    raise self._sync_error
                if os.write(self._fd, line) != len(line):  # a full disk writes a part
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            except OSError as exc:
                with contextlib.suppress(OSError):  # shrinking needs no free space
                    os.ftruncate(self._fd, size)
                    os.fsync(self._fd)
                raise self._write_error(record["kind"], exc, size) from None
            self.records += 1
            self._written += 1
            if self._syncer is None:
                self._syncer = threading.Thread(
                    target=self._sync_behind, name="pytest-hud-ledger-sync", daemon=True
                )
                self._syncer.start()
            self._lock.notify_all()

    def _write_error(self, kind: str, exc: OSError, size: int) -> LedgerWriteError:
        return LedgerWriteError(
            f"{self.path}: could not append a {kind} record ({exc.strerror or exc}); the "
            f"ledger is intact up to its last complete line ({size} bytes); fix: free space "
            f"on that filesystem, then --hud-resume={self.path} runs only the episodes it lacks"
        )

    def _sync_behind(self) -> None:
        """The ledger's thread: one fsync for every record written since the last, until
        closed with nothing left to sync."""
        with self._lock:
            while True:
                self._lock.wait_for(lambda: self._synced < self._written or self._closing)
                if self._synced == self._written:
                    return
                target, fd = self._written, self._fd
                self._lock.release()
                try:
                    os.fsync(fd)
                    error = None
                except OSError as exc:
                    error = exc
                finally:
                    self._lock.acquire()
                if error is not None and self._sync_error is None:
                    self._sync_error = error
                self._synced = target
                self._lock.notify_all()

    def sync(self, timeout: float = 120.0) -> None:
        """Wait until every record appended so far is on disk; LedgerWriteError if the disk
        refused one, or took longer than ``timeout`` seconds."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._synced >= self._written, timeout):
                raise LedgerWriteError(
                    f"{self.path}: the disk did not confirm the ledger's last records within "
                    f"{timeout:g} s; fix: check that filesystem (a hung network mount?)"
                )
            if self._sync_error is not None:
                size = os.fstat(self._fd).st_size if self._fd >= 0 else 0
                raise self._write_error("episode", self._sync_error, size)

    def begin_run(
        self, provenance: Provenance | dict[str, JSONValue], run: str | None = None
    ) -> str:
        """Record the session's provenance once; returns the run id episodes refer to."""
        run = run or uuid.uuid4().hex[:12]
        self.append(
            {
                "kind": "run",
                "v": VERSION,
                "run": run,
                "started": time.time(),
                "provenance": provenance,
            }
        )
        return run

    def close(self) -> None:
        """Sync what is left (bounded) and close; appending afterwards is an error."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        if self._syncer is not None:
            self._syncer.join(120.0)
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def merge(ledgers: Iterable[LedgerContents | str | Path], prefer: str = "last") -> LedgerContents:
    """Runs and episodes of several ledgers (e.g. shards of one taskset), one episode per
    :func:`key`. ``prefer="last"`` (default): a later ledger's record, and a later line
    within a ledger, replaces an earlier one (a rerun wins); ``"first"`` keeps the
    earliest. Episodes keep the order in which their key first appeared."""
    if prefer not in ("first", "last"):
        raise ValueError(f"prefer: expected 'first' or 'last', got {prefer!r}")
    out = LedgerContents()
    chosen: dict[Key, EpisodeRecord] = {}
    parts: list[LedgerContents] = []
    for item in ledgers:
        contents = item if isinstance(item, LedgerContents) else read(item)
        parts.append(contents)
        for run, run_rec in contents.runs.items():
            out.runs.setdefault(run, run_rec)
        for rec in contents.episodes:
            k = key(rec)
            if prefer == "last" or k not in chosen:
                chosen[k] = rec
    out.episodes = list(chosen.values())
    ran = {key(rec)[:4] for rec in out.episodes}  # a row run in any ledger is not unrun
    unrun: dict[Key, UnrunRecord] = {}
    for item in parts:
        for left in item.unrun:
            if key(left)[:4] not in ran and (prefer == "last" or key(left) not in unrun):
                unrun[key(left)] = left
    out.unrun = list(unrun.values())
    return out


def results(contents: LedgerContents) -> ResultsDocument:
    """The results-JSON document (``--hud-results`` shape) of a ledger's episodes."""
    from pytest_hud.evaluation.results import results_document

    # each record less its kind and version: a row (with the run it belongs to)
    rows = [
        cast(Row, {k: v for k, v in r.items() if k not in ("kind", "v")}) for r in contents.episodes
    ]
    for unrun in contents.unrun:  # a row not run: skipped, saying why (undecided: incomplete)
        fields = {k: unrun.get(k) for k in ("nodeid", "key", "seed", "rep", "agent", "arm")}
        row = {k: v for k, v in fields.items() if v is not None}
        row.update(outcome="skipped", skip_reason=unrun.get("detail", ""))
        if unrun["reason"] != "skipped":
            row["unrun"] = unrun["reason"]
        rows.append(cast(Row, row))
    agents = sorted({str(r.get("agent")) for r in rows})
    meta = {
        "agent": agents[0] if len(agents) == 1 else agents,
        "provenance": {run: rec.get("provenance") for run, rec in contents.runs.items()},
    }
    return results_document(rows, meta=meta, gates=[])


def write_ledger(path: Path, contents: LedgerContents) -> None:
    """``contents`` as a ledger file at ``path``, written whole and then moved into place."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        for rec in [*contents.runs.values(), *contents.episodes, *contents.unrun]:
            f.write(json.dumps(rec, default=str, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
