"""The episode ledger (durable appends, torn tails after a real SIGKILL, merge, CLI) and
the run's provenance (versions, git, checkpoint hash, docker digest, repro command)."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_hud.evaluation import ledger_file as L
from pytest_hud.evaluation import provenance as P

ROOT = Path(__file__).resolve().parents[2]


def row(task: str, seed: int, rep: int = 0, success: bool = True, **extra: Any) -> dict[str, Any]:
    env, slug = task.split("/")
    return {"nodeid": f"t.py::test[{task}[{rep}]]", "group": "t.py::test", "key": task,
            "env": env, "task_id": slug, "slug": slug, "args": {"seed": seed}, "rep": rep,
            "seed": seed, "agent": "zero", "outcome": "passed" if success else "failed",
            "score": float(success), "success": success, "total_reward": 1.0, "steps": 10,
            "duration": 0.5, "error": None, **extra}  # fmt: skip


def test_append_then_read_round_trips_and_fsyncs_behind_the_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record is in the file when append returns; the ledger's own thread fsyncs behind
    (never the appending thread), and sync() returns once every record is on disk."""
    import threading

    synced: list[tuple[int, str]] = []
    real = os.fsync
    monkeypatch.setattr(
        os, "fsync", lambda fd: (synced.append((fd, threading.current_thread().name)), real(fd))[1]
    )
    path = tmp_path / "deep" / "ledger.jsonl"
    with L.Ledger(path) as led:
        run = led.begin_run({"host": {"hostname": "h"}})
        opened = len(synced)  # the new name's directory, on this thread
        for s in range(3):
            led.append(L.episode_record(row("cheap/balance", s), run=run, checkpoint="c",
                                        checkpoint_hash="sha256:ab"))  # fmt: skip
            assert len(path.read_bytes().splitlines()) == s + 2  # in the file at once
        led.sync()
        behind = synced[opened:]
        assert behind and all(name == "pytest-hud-ledger-sync" for _, name in behind), synced
        assert len(behind) <= 4  # one fsync may cover several records
        led.append(L.episode_record(row("cheap/balance", 3), run=run))
    assert len(synced) > opened + len(behind)  # close synced the last one
    got = L.read(path)
    assert got.torn is None
    assert list(got.runs) == [run] and got.runs[run]["provenance"]["host"]["hostname"] == "h"
    assert [e["seed"] for e in got.episodes] == [0, 1, 2, 3]
    assert L.key(got.episodes[1]) == ("cheap/balance", 1, 0, "zero", "sha256:ab")
    with pytest.raises(L.LedgerError, match="kind run, episode or unrun"):
        L.Ledger(path).append({"seed": 1})


WRITER = """
import os, sys, time
from pytest_hud.evaluation.ledger_file import Ledger, episode_record
led = Ledger(sys.argv[1])
run = led.begin_run({})
mode = sys.argv[2]
i = 0
while True:
    led.append(episode_record({"key": "e/t", "seed": i, "rep": 0, "agent": "a",
                               "success": i % 2 == 0, "pad": "x" * 4000}, run=run))
    print(i, flush=True)
    i += 1
    if mode == "torn" and i == 20:
        # a writer that dies inside a record: half a line, then wait for the kill
        os.write(led._fd, b'{"kind":"episode","seed":20,"pad":"xxxx')
        print("torn", flush=True)
        time.sleep(60)
"""


def _run_and_kill(path: Path, mode: str, until: str) -> list[str]:
    """Run the writer until it prints ``until``, then SIGKILL it; its acknowledgements."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), mode], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + 60
    try:
        while until.encode() not in buf.split(b"\n"):
            assert time.monotonic() < deadline, f"writer never acknowledged {until!r}"
            if sel.select(timeout=1.0):
                chunk = os.read(fd, 65536)  # raw reads: no buffered line hides from select
                assert chunk, f"writer exited early: {proc.wait(5)}"
                buf += chunk
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        sel.close()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return [x.decode() for x in buf.split(b"\n") if x]


def test_sigkill_mid_stream_leaves_every_acknowledged_record_whole(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    acks = _run_and_kill(path, "stream", "40")  # killed while still appending
    got = L.read(path)
    seeds = [e["seed"] for e in got.episodes]
    assert seeds == list(range(len(seeds)))  # no gap, no garbage
    assert len(seeds) >= len(acks)  # everything acknowledged survived


def test_torn_last_line_after_sigkill_is_reported_and_cut_before_appending(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.jsonl"
    _run_and_kill(path, "torn", "torn")
    got = L.read(path)
    assert [e["seed"] for e in got.episodes] == list(range(20))
    assert got.torn is not None and got.torn.line == 22  # run line + 20 episodes + torn
    assert got.torn.size == len(b'{"kind":"episode","seed":20,"pad":"xxxx')
    with L.Ledger(path) as led:  # resume: the fragment goes, the next record is whole
        assert led.torn == got.torn
        led.append(L.episode_record(row("e/t", 20), run="r2"))
    again = L.read(path)
    assert again.torn is None and [e["seed"] for e in again.episodes] == list(range(21))


def test_a_bad_line_in_the_middle_is_an_error_not_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text('{"kind":"run","run":"r"}\nnot json\n{"kind":"run","run":"s"}\n')
    with pytest.raises(L.LedgerError, match="line 2: expected one JSON object"):
        L.read(path)


def test_a_record_the_disk_does_not_confirm_fails_sync_and_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsync error on the ledger's thread is not lost: sync() raises it, and so does the
    next append, naming the file and the fix."""
    import errno

    path = tmp_path / "l.jsonl"
    with L.Ledger(path) as led:
        run = led.begin_run({})
        led.sync()

        def refuse(fd: int) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(os, "fsync", refuse)
        led.append(L.episode_record(row("cheap/balance", 0), run=run))
        with pytest.raises(L.LedgerWriteError, match=r"l\.jsonl.*Input/output error.*fix:"):
            led.sync()
        with pytest.raises(L.LedgerWriteError, match="could not append an? episode record"):
            led.append(L.episode_record(row("cheap/balance", 1), run=run))
        monkeypatch.undo()
    assert [e["seed"] for e in L.read(path).episodes] == [0]  # written, only not confirmed


def test_opening_checks_the_last_record_only_and_refuses_a_file_that_is_no_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append needs the end of the file: opening a long history parses one line, so the
    ledger beside every run's results does not slow each start as it grows; a file that is
    not a ledger (a results JSON given by mistake) is refused and left as it was."""
    path = tmp_path / "l.jsonl"
    with L.Ledger(path) as led:
        run = led.begin_run({})
        for s in range(200):
            led.append(L.episode_record(row("cheap/balance", s), run=run))
    with path.open("ab") as f:
        f.write(b'{"kind":"episode","se')  # a writer killed mid-line
    parsed: list[int] = []
    real = L._parse
    monkeypatch.setattr(L, "_parse", lambda raw, n, p: (parsed.append(n), real(raw, n, p))[1])
    with L.Ledger(path) as led:
        assert parsed == [201]  # the run line, 200 episodes: the last whole one only
        assert led.torn is not None and led.torn.line == 202
        led.append(L.episode_record(row("cheap/balance", 200), run=run))
    monkeypatch.undo()
    assert [e["seed"] for e in L.read(path).episodes] == list(range(201))

    results = tmp_path / "results.json"
    text = json.dumps({"rollouts": [row("cheap/balance", 0)]}, indent=2)
    results.write_text(text)  # no newline at the end: its last line looks torn
    with pytest.raises(L.LedgerError, match=r"line \d+: expected one JSON object per line"):
        L.Ledger(results)
    assert results.read_text() == text


def _ledger(path: Path, run: str, rows: list[dict[str, Any]]) -> Path:
    with L.Ledger(path) as led:
        led.begin_run({"shard": run}, run=run)
        for r in rows:
            led.append(L.episode_record(r, run=run, checkpoint_hash="sha256:1"))
    return path


def test_merge_drops_duplicates_later_or_first_wins(tmp_path: Path) -> None:
    a = _ledger(tmp_path / "a.jsonl", "A", [row("e/t1", 0), row("e/t1", 1, success=False)])
    b = _ledger(tmp_path / "b.jsonl", "B", [row("e/t1", 1, success=True), row("e/t2", 0)])
    last = L.merge([a, b])
    assert [(e["key"], e["seed"], e["run"]) for e in last.episodes] == [
        ("e/t1", 0, "A"), ("e/t1", 1, "B"), ("e/t2", 0, "B")]  # fmt: skip
    first = L.merge([a, b], prefer="first")
    assert [e["run"] for e in first.episodes] == ["A", "A", "B"]
    assert set(last.runs) == {"A", "B"}
    other_ckpt = L.episode_record(row("e/t1", 0), run="C", checkpoint_hash="sha256:2")
    assert len(L.merge([last, L.LedgerContents(episodes=[other_ckpt])]).episodes) == 4
    with pytest.raises(ValueError, match="prefer"):
        L.merge([a], prefer="middle")


def test_a_row_not_run_is_a_record_of_its_own_never_an_episode(tmp_path: Path) -> None:
    """A row a session did not run is an ``unrun`` line saying why: reading the ledger
    counts it apart from the episodes, a merge drops it once another ledger ran the row,
    and the merged results keep it as an undecided (incomplete) skipped row."""
    skipped = {**row("e/t2", 0), "outcome": "skipped", "unrun": "budget",
               "skip_reason": "the budget (1 episodes) is spent: not run (undecided)"}  # fmt: skip
    path = tmp_path / "a.jsonl"
    with L.Ledger(path) as ledger:
        run = ledger.begin_run({})
        ledger.append(L.episode_record(row("e/t1", 0), run=run))
        ledger.append(L.unrun_record(skipped, run=run))  # type: ignore[arg-type]
    got = L.read(path)
    assert [e["key"] for e in got.episodes] == ["e/t1"]
    assert [(u["key"], u["reason"]) for u in got.unrun] == [("e/t2", "budget")]
    assert L.resume_index(got).rerun == {L.key(got.unrun[0])}
    doc = L.results(got)
    assert doc["complete"] is False and doc["items"]["unrun"] == {"budget": 1}
    assert [r["outcome"] for r in doc["rollouts"]] == ["passed", "skipped"]
    later = _ledger(tmp_path / "b.jsonl", "B", [row("e/t2", 0)])
    merged = L.merge([got, later])
    assert merged.unrun == [] and len(merged.episodes) == 2
    assert L.results(merged)["complete"] is True


def test_merge_cli_writes_ledger_and_results_json(tmp_path: Path) -> None:
    a = _ledger(tmp_path / "a.jsonl", "A", [row("e/t1", 0), row("e/t1", 1, success=False)])
    b = _ledger(tmp_path / "b.jsonl", "B", [row("e/t1", 1), row("e/t2", 0)])
    with b.open("ab") as f:
        f.write(b'{"kind":"epi')  # a shard killed mid-write
    out, res = tmp_path / "c.jsonl", tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_hud", "ledger", "merge", str(a), str(b), "-o", str(out),
         "--results", str(res)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "3 episodes (1 duplicates dropped) from 2 ledgers" in done.stdout
    assert "dropped a torn last line" in done.stderr
    merged = L.read(out)
    assert len(merged.episodes) == 3 and set(merged.runs) == {"A", "B"}
    doc = json.loads(res.read_text())
    assert doc["per_task"]["e/t1"]["episodes"] == 2 and doc["per_task"]["e/t1"]["successes"] == 2
    assert doc["overall"]["episodes"] == 3 and len(doc["rollouts"]) == 3
    assert set(doc["provenance"]) == {"A", "B"}
    missing = [str(tmp_path / "none.jsonl"), "-o", str(out)]
    bad = subprocess.run(
        [sys.executable, "-m", "pytest_hud", "ledger", "merge", *missing],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "none.jsonl" in bad.stderr


# -- provenance ---------------------------------------------------------------------------
def test_package_versions_report_absent_packages_as_none() -> None:
    got = P.package_versions(["pytest", "no-such-package-pytest-hud"])
    assert got["pytest-hud"] is not None and got["numpy"] is not None
    assert got["pytest"] == pytest.__version__
    assert got["no-such-package-pytest-hud"] is None


def test_git_revision_and_dirty_flag(tmp_path: Path) -> None:
    assert P.git_revision(tmp_path) is None
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True, timeout=30)
    (tmp_path / "f").write_text("1")
    subprocess.run([*git, "add", "f"], check=True, timeout=30)
    subprocess.run([*git, "commit", "-qm", "x"], check=True, timeout=30)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip()  # fmt: skip
    assert P.git_revision(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "f").write_text("2")
    assert P.git_revision(tmp_path) == {"commit": head, "dirty": True}


def test_checkpoint_hash_is_content_addressed_and_stable(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "elsewhere" / "b"
    for root in (a, b):
        (root / "sub").mkdir(parents=True)
    (a / "model.bin").write_bytes(os.urandom(3 << 20))  # several streaming chunks
    (b / "model.bin").write_bytes((a / "model.bin").read_bytes())
    for root in (a, b):
        (root / "sub" / "config.json").write_text('{"x": 1}')
    h = P.checkpoint_hash(a)
    assert h.startswith("sha256:") and h == P.checkpoint_hash(b)  # location-independent
    assert P.checkpoint_hash(a) == h  # cached
    (b / "sub" / "config.json").write_text('{"x": 2}')
    assert P.checkpoint_hash(b) != h
    (b / "sub" / "config.json").write_text('{"x": 1}')
    (b / "sub" / "config.json").rename(b / "sub" / "cfg.json")
    assert P.checkpoint_hash(b) != h  # a renamed file is a different checkpoint
    single = P.checkpoint_hash(a / "model.bin")
    assert single != h and single == P.checkpoint_hash(b / "model.bin")
    with pytest.raises(FileNotFoundError, match="expected a file or folder"):
        P.checkpoint_hash(tmp_path / "missing")


@pytest.mark.docker
def test_docker_image_digest_on_the_real_engine() -> None:
    docker = pytest.importorskip("docker")
    from pytest_hud.runtime.docker.engine import image_digest

    assert image_digest("pytest-hud-no-such-image:never") is None
    try:
        client = docker.from_env(timeout=10)
        images = [i for i in client.images.list() if i.tags]
        client.close()
    except docker.errors.DockerException:
        pytest.skip("no Docker engine here (the missing-image case above still ran)")
    if not images:
        pytest.skip("the engine has no tagged image to look up")
    image = images[0]
    got = image_digest(image.tags[0])
    assert got in ([*image.attrs.get("RepoDigests", [])[:1], image.id])


def test_repro_command_and_collect(tmp_path: Path) -> None:
    cmd = P.repro_command("tests/t.py::test[e/t it[2]]", "lerobot:act", 7, runtime="docker:img")
    assert cmd == ("pytest 'tests/t.py::test[e/t it[2]]' --hud-agent=lerobot:act "
                   "--hud-seed=7 --hud-runtime=docker:img")  # fmt: skip
    (tmp_path / "w.bin").write_bytes(b"w")
    got = P.collect(suite=ROOT, env_packages=["gymnasium"], checkpoint=tmp_path, seed=7,
                    command=["pytest", "-k", "a b"])  # fmt: skip
    json.dumps(got)
    assert got["checkpoint"] == {"path": str(tmp_path), "hash": P.checkpoint_hash(tmp_path)}
    assert got["git"] is not None and len(got["git"]["commit"]) == 40
    assert got["command"] == "pytest -k 'a b'" and got["image"] is None
