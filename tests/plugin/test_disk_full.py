"""A disk that fills up (issue 26 #4): a real tmpfs of a few KB, mounted for the test.

Writing the ledger or a results document onto it must fail with one error that names the
path and what was kept, and leave what was there whole: the ledger valid up to its last
complete line (a later resume reads it), the previous results document unchanged.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from needs import require

from pytest_hud.evaluation import ledger_file as ledger
from pytest_hud.evaluation.durable import OutputWriteError, write_atomically


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KB tmpfs (root can mount one; CI runs as root)."""
    where = tmp_path / "disk"
    where.mkdir()
    require(os.geteuid() == 0, "root (to mount a tmpfs)", "run the tests as root, as CI does")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path, leave: int = 0) -> Path:
    """Fill ``disk`` with a filler file, leaving about ``leave`` bytes."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with filler.open("wb") as f:
        try:
            f.write(b"\0" * max(0, free - leave))
            f.flush()
        except OSError:
            pass
    return filler


def _episode(i: int) -> dict[str, object]:
    return {
        "kind": "episode",
        "run": "r",
        "key": f"t/{i}",
        "seed": i,
        "outcome": "passed",
        "pad": "x" * 300,
    }


def test_a_full_disk_leaves_the_ledger_whole_and_says_what_it_kept(small_disk: Path) -> None:
    path = small_disk / "run.ledger.jsonl"
    filler = _fill(small_disk, leave=4096)
    book = ledger.Ledger(path)
    book.begin_run({"agent": "zero"})
    written = 0
    with pytest.raises(ledger.LedgerWriteError) as err:
        for i in range(1000):
            book.append(_episode(i))
            written += 1
    message = str(err.value)
    assert str(path) in message and "intact up to its last complete line" in message
    assert "--hud-resume" in message
    contents = ledger.read(path)
    assert contents.torn is None  # cut back to whole lines
    assert len(contents.episodes) == written == book.records - 1
    assert path.read_bytes().endswith(b"\n")

    filler.unlink()  # space again: the same writer appends on a line of its own
    book.append(_episode(written))
    book.close()
    assert [e["seed"] for e in ledger.read(path).episodes] == list(range(written + 1))


def test_a_full_disk_keeps_the_previous_results_document(small_disk: Path) -> None:
    path = small_disk / "results.json"
    write_atomically(path, '{"v": 1}', what="results JSON")
    _fill(small_disk, leave=512)
    with pytest.raises(OutputWriteError) as err:
        write_atomically(path, "x" * 64_000, what="results JSON")
    message = str(err.value)
    assert f"results JSON {path}" in message and "previous results.json is unchanged" in message
    assert path.read_text() == '{"v": 1}'
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "results.json"]


ROOT = Path(__file__).resolve().parents[2]


def _session(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(ROOT / "examples" / "tests" / "cartpole.jsonl"),
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--hud-agent=zero",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_session_whose_ledger_disk_fills_fails_once_and_resumes(
    small_disk: Path, tmp_path: Path
) -> None:
    """The ledger's disk fills mid-session: one error naming the path and how many
    rollouts it lacks, the session fails (exit 1, not an internal error), the ledger stays
    whole, and once there is space a --hud-resume runs only the missing rollouts."""
    path = small_disk / "run.ledger.jsonl"
    filler = _fill(small_disk, leave=8192)
    full = _session(f"--hud-ledger={path}", "--hud-group=8", cwd=tmp_path)
    text = full.stdout + full.stderr
    assert full.returncode == 1, text
    assert "INTERNALERROR" not in text
    assert f"FAILED hud ledger: {path}: could not append" in text, text
    assert "finished rollout(s) are not in it" in text
    kept = ledger.read(path)
    assert kept.torn is None and 0 < len(kept.episodes) < 24

    filler.unlink()
    resumed = _session(f"--hud-ledger={path}", f"--hud-resume={path}", "--hud-group=8",
                       cwd=tmp_path)  # fmt: skip
    assert f"hud resume: {len(kept.episodes)} episodes kept" in resumed.stdout, resumed.stdout
    assert len(ledger.merge([path]).episodes) == 24


def test_an_atomic_write_keeps_an_ordinary_file_mode(tmp_path: Path) -> None:
    fresh = tmp_path / "results.json"
    write_atomically(fresh, "{}")
    assert fresh.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
    fresh.chmod(0o640)
    write_atomically(fresh, "{}")
    assert fresh.stat().st_mode & 0o777 == 0o640
