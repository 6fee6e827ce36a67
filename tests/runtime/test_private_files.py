"""Files that coordinate one user's processes live in a folder of that user's own (issue 52
#3): robot claims and docker creates in flight were in the shared temp folder under names
anyone could predict, opened through links. Another local user's symlink there made a claim
truncate and write its target, anyone could hold a claim and choose the text the operator
was shown, and a link in place of the creates' folder let the settle step delete another
folder's files. Now the folder is the user's own (mode 0700), a link is never followed, and
a claim's text is shown only as a pid."""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_hud.errors import BridgeError
from pytest_hud.interop.lerobot.robots import _RobotLock

#: what an attacker's file says: set the window title, clear the screen, write the clipboard
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZWNobyBvd25lZA==\x07"


@pytest.fixture
def shared_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the shared temp folder (what tempfile.gettempdir() names), with no
    folder chosen through a variable and no login runtime folder."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)  # as /tmp: world-writable, sticky
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    for name in ("PYTEST_HUD_ROBOT_LOCKS", "PYTEST_HUD_INTENTS", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    return shared


def test_a_planted_link_never_gets_a_robot_claim_written_through_it(shared_tmp: Path) -> None:
    """The attack: a symlink at the claim's predictable name in the temp folder, pointing at
    a file of the victim's. take() truncated the target and wrote a pid into it. Now the
    claim lives in the user's own folder (0700) and the target is untouched; a link planted
    in that folder itself is refused, never followed."""
    victim = shared_tmp.parent / "victim.txt"
    victim.write_text("the victim's data\n")
    (shared_tmp / "pytest-hud-robot-so101-arm1.lock").symlink_to(victim)
    claim = _RobotLock.take("so101", {"id": "arm1"})
    try:
        assert victim.read_text() == "the victim's data\n"
        folder = claim.path.parent
        assert not str(claim.path).startswith(str(shared_tmp / "pytest-hud-robot"))
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()
        assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
        assert claim.path.read_text() == str(os.getpid())
        # a link in the private folder itself (only this user could put it there): refused
        from pytest_hud.plumbing.private_dir import PrivateDirError

        planted = folder / "robot-so101-arm2.lock"
        planted.symlink_to(victim)
        with pytest.raises(PrivateDirError, match="cannot be opened as a file"):
            _RobotLock.take("so101", {"id": "arm2"})
        assert victim.read_text() == "the victim's data\n"
    finally:
        claim.release()


def test_a_claims_text_reaches_the_operator_only_as_a_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever holds a claim chose the text of 'driven by pid ...', escapes included, and the
    operator's terminal obeyed them. Now only a number is shown as a pid."""
    monkeypatch.setenv("PYTEST_HUD_ROBOT_LOCKS", str(tmp_path))
    claim = _RobotLock.take("so101", {"id": "arm1"})  # where the claim lives
    claim.release()
    holder = os.open(claim.path, os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        os.write(holder, ESCAPES.encode())
        with pytest.raises(BridgeError) as refused:
            _RobotLock.take("so101", {"id": "arm1"})
        message = str(refused.value)
        assert "\x1b" not in message and "\x07" not in message and "pwned" not in message
        assert "already driven by another process: one robot is one slot" in message
        os.ftruncate(holder, 0)
        os.pwrite(holder, b"4242", 0)
        with pytest.raises(BridgeError, match="already driven by pid 4242: one robot is one slot"):
            _RobotLock.take("so101", {"id": "arm1"})
    finally:
        os.close(holder)


def test_a_folder_that_is_not_the_users_own_is_refused_with_the_fix(
    shared_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A squatter's folder at the private folder's name, a link there, or a folder others
    may write is never used: one error names it and the fix."""
    from pytest_hud.plumbing.private_dir import PrivateDirError

    squatted = shared_tmp / f"pytest-hud-{os.getuid()}"
    target = tmp_path / "elsewhere"
    target.mkdir()
    squatted.symlink_to(target)
    with pytest.raises(PrivateDirError, match="is a link or a file, not a folder.*Fix: remove"):
        _RobotLock.take("so101", {"id": "arm1"})
    squatted.unlink()
    writable = tmp_path / "writable"
    writable.mkdir()
    writable.chmod(0o777)
    monkeypatch.setenv("PYTEST_HUD_ROBOT_LOCKS", str(writable))
    with pytest.raises(PrivateDirError, match=r"may be written by others \(mode 777\)"):
        _RobotLock.take("so101", {"id": "arm1"})
    # another user's folder: as root, one handed to nobody; otherwise /, which is root's
    if os.getuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o755)
        os.chown(foreign, 65534, 65534)
    else:
        foreign = Path("/")
    monkeypatch.setenv("PYTEST_HUD_ROBOT_LOCKS", str(foreign))
    with pytest.raises(PrivateDirError, match="belongs to user id .*PYTEST_HUD_ROBOT_LOCKS"):
        _RobotLock.take("so101", {"id": "arm1"})
    assert not (target / "robot-locks").exists()


def test_settling_docker_creates_never_reads_a_planted_folder(
    shared_tmp: Path, tmp_path: Path, client: Any
) -> None:
    """The creates' folder was ``pytest-hud-creates`` in the temp folder: a link there to a
    folder of the victim's made settle_intents take its files for intents of dead
    processes and delete the old ones (here a log named by its date, an hour old, which
    reads as pid 2024 started at tick 06: a dead process). Now the folder is the user's
    own, and the victim's files stay."""
    from pytest_hud.runtime.docker.intents import settle_intents

    victim = tmp_path / "victim"
    victim.mkdir()
    notes = victim / "2024.06.30.log"
    notes.write_text("the victim's notes\n")
    hour_ago = time.time() - 3600
    os.utime(notes, (hour_ago, hour_ago))
    (shared_tmp / "pytest-hud-creates").symlink_to(victim)
    assert settle_intents(client, timeout=5) == []
    assert notes.read_text() == "the victim's notes\n"
