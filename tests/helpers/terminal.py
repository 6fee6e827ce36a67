"""A real terminal for the tests of what a person sees: a tmux pane running a command, its
screen read with capture-pane, keys typed with send-keys; every wait is bounded and polls
the screen (no sleeps that guess a duration). Each pane has its own tmux server (``-S``, a
socket in its own directory): on one shared server a test's kill-session can end the
server while another test's new-session connects to it ("server exited unexpectedly",
seen under -n 2 in CI)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from needs import require


class Pane:
    def __init__(self, command: str, cwd: Path, env: dict[str, str], width: int = 160) -> None:
        require(shutil.which("tmux"), "tmux", "install tmux (apt-get install tmux)")
        self.name = f"hud-{uuid.uuid4().hex[:8]}"
        self.home = Path(tempfile.mkdtemp(prefix="hud-tmux-"))  # short: a socket path has a limit
        self.tmux = ["tmux", "-S", str(self.home / "socket")]
        self.log = cwd / f"{self.name}.screen"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        script = f"cd {shlex.quote(str(cwd))} && env {exports} {command}; echo EXIT=$?; sleep 600"
        started = subprocess.run(
            [
                *self.tmux,
                "new-session",
                "-d",
                "-s",
                self.name,
                "-x",
                str(width),
                "-y",
                "50",
                "bash",
                "-c",
                script,
            ],
            check=False,
        )
        if started.returncode != 0:  # no server to stop: the directory is all there is
            shutil.rmtree(self.home, ignore_errors=True)
            started.check_returncode()

    def screen(self) -> str:
        out = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-J", "-S", "-2000", "-t", self.name],
            capture_output=True,
            text=True,
            check=False,
        )
        return out.stdout

    def wait_for(
        self, text: str, timeout: float = 120.0, after: int = 0, since: str | None = None
    ) -> str:
        """Wait until ``text`` appears on the screen (at least ``after`` + 1 times), or with
        ``since`` once below the last ``since`` (for a line redrawn in place, which the
        screen may show more than once)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if since is None:
                found = screen.count(text) > after
            else:
                at = screen.rfind(since)
                found = at >= 0 and text in screen[at:]
            if found:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared on the screen:\n{screen}")
            time.sleep(0.1)

    def send(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def close(self) -> None:
        self.log.write_text(self.screen())
        subprocess.run([*self.tmux, "kill-server"], check=False)
        shutil.rmtree(self.home, ignore_errors=True)
