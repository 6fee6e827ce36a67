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
from conftest import require

from pytest_hud.evaluation import ledger
from pytest_hud.evaluation.durable import OutputWriteError, write_atomically


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 KB tmpfs (root can mount one; CI runs as root)."""
    where = tmp_path / "disk"
    where.mkdir()
    require(os.geteuid() == 0, "root (to mount a tmpfs)", "run the tests as root, as CI does")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(where)], check=True)
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
