"""The robots guide's "Try it without a robot" section as a test runs it: its files under the
names it gives them, its commands as written, each ending as its note says
(``<!-- robots-guide: run, exit N -->``, or ``web operator, exit N``: the web console driven
in a headless Chromium as a person would: Start at each gate, the detector's verdict accepted,
or the grade the driver is told to give).

Used by tests/e2e/test_robots_guide.py (this venv) and tests/project/test_extras.py (a clean
venv holding ``pytest-hud[lerobot,robot-sim]`` installed from wheels, outside the checkout)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from paths import ROOT

GUIDE = ROOT / "docs" / "guides" / "robots.md"
URL_FILE_ENV = "PYTEST_HUD_OPERATOR_URL_FILE"


@dataclass
class Command:
    how: str  # "run" or "web operator"
    exit: int
    script: str


def section() -> str:
    text = GUIDE.read_text()
    start = text.index("## Try it without a robot")
    return text[start : text.index("\n## ", start + 1)]


def files() -> dict[str, str]:
    """The section's python blocks, each under the one file name given before it."""
    text, out, start = section(), {}, 0
    for block in re.finditer(r"```python\n(.*?)```", text, re.S):
        named = re.findall(r"`(\w+\.py)`", text[start : block.start()])
        assert len(named) == 1, f"the guide names no single file for:\n{block.group(1)}"
        out[named[0]] = block.group(1)
        start = block.end()
    return out


def commands() -> list[Command]:
    """The section's bash blocks with the note saying how each ends."""
    found = []
    for m in re.finditer(
        r"<!-- robots-guide: (.*?), exit (\d+) -->\n```bash\n(.*?)```", section(), re.S
    ):
        found.append(Command(m.group(1), int(m.group(2)), m.group(3)))
    blocks = len(re.findall(r"```bash\n", section()))
    assert len(found) == blocks, "a command in the guide has no robots-guide note"
    return found


def run_guide(
    folder: Path,
    env: Mapping[str, str],
    browser_factory: Callable[[], object],
    *,
    timeout: float = 1500,
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Write the files into ``folder`` and run every command there in ``env`` (its PATH
    names the pytest to use); web operator commands are answered from a browser the
    factory opens. Each command's result, by the command's first words."""
    for name, text in files().items():
        (folder / name).write_text(text)
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    for command in commands():
        if command.how == "run":
            result = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", command.script],
                cwd=folder, env=dict(env), capture_output=True, text=True,
                timeout=timeout, check=False,
            )  # fmt: skip
        else:
            assert command.how == "web operator", command.how
            result = _with_browser(command, folder, env, browser_factory, timeout)
        out = result.stdout + result.stderr
        assert result.returncode == command.exit, (
            f"the guide says exit {command.exit}, got {result.returncode}:\n"
            f"{command.script}\n{out[-6000:]}"
        )
        assert "Traceback" not in out, out[-6000:]
        done[command.how] = result
    return done


def _with_browser(
    command: Command,
    folder: Path,
    env: Mapping[str, str],
    browser_factory: Callable[[], object],
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    from browser import click, shown, until

    url_file = folder / "console-url.txt"
    url_file.unlink(missing_ok=True)
    out, err = folder / "web.out", folder / "web.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", command.script],
            cwd=folder, env={**env, URL_FILE_ENV: str(url_file)},
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True,
        )  # fmt: skip
    browser = browser_factory()
    try:
        deadline = time.monotonic() + timeout
        while not (url_file.exists() and url_file.read_text().strip()):
            assert proc.poll() is None, out.read_text()[-4000:] + err.read_text()[-4000:]
            assert time.monotonic() < deadline, "the console never printed its url"
            time.sleep(0.2)
        browser.get(url_file.read_text().strip())  # type: ignore[attr-defined]
        answered = -1
        while proc.poll() is None:
            assert time.monotonic() < deadline, "the session never ended"
            state = browser.js(  # type: ignore[attr-defined]
                "document.getElementById('gate').hidden ? "
                "(document.getElementById('ask').hidden ? '' : 'verdict') : 'gate'"
            )
            seq = browser.js("typeof seq === 'number' ? seq : -1")  # type: ignore[attr-defined]
            if state and seq != answered:
                if state == "gate":
                    click(browser, "start")  # type: ignore[arg-type]
                elif not browser.js("document.getElementById('accept').hidden"):  # type: ignore[attr-defined]
                    click(browser, "accept")  # type: ignore[arg-type]  # the detector's verdict
                else:
                    click(browser, "success")  # type: ignore[arg-type]
                answered = seq
            time.sleep(0.2)
        until(
            browser,
            lambda: (
                shown(browser, "summary")
                or "ended"
                in str(  # type: ignore[arg-type]
                    browser.js("document.body.innerText")  # type: ignore[attr-defined]
                )
            ),
            "the end of the session",
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        browser.quit()  # type: ignore[attr-defined]
    return subprocess.CompletedProcess(
        command.script, proc.returncode, out.read_text(), err.read_text()
    )


def check_results(folder: Path) -> None:
    """What the guide says the results hold: every row of the first run graded by the
    detector with safety counts; in the A/B, each row run keeps the rubric it names, every
    unrun row says why, the run is incomplete, and the ledger has an unrun line for each."""
    rows = json.loads((folder / "results.json").read_text())["rollouts"]
    assert len(rows) == 6 and {r["grade_source"] for r in rows} == {"detector"}, rows
    assert all(isinstance(r["safety"], dict) for r in rows)
    doc = json.loads((folder / "ab.json").read_text())
    unrun = [r for r in doc["rollouts"] if r["outcome"] == "skipped"]
    assert unrun and all(r.get("unrun") == "budget" for r in unrun), unrun
    assert doc["complete"] is False and doc["items"]["unrun"] == {"budget": len(unrun)}
    ran = [r for r in doc["rollouts"] if r["outcome"] != "skipped"]
    assert all(isinstance(r.get("safety"), dict) and r.get("arm_code") for r in ran)
    rubric = re.search(r'RUBRIC = "(.*)"', files()["test_so101.py"])
    assert rubric is not None and {r.get("rubric") for r in ran} == {rubric.group(1)}, ran
    ledger = [json.loads(x) for x in (folder / "ab.ledger.jsonl").read_text().splitlines()]
    assert sum(1 for r in ledger if r["kind"] == "unrun") == len(unrun)
    html = (folder / "ab.html").read_text()
    assert "Attended episodes" in html and "not run: budget" in html


def env_with(bin_dir: Path, **extra: str) -> dict[str, str]:
    """This environment with ``bin_dir`` first on PATH and nothing of the checkout on the
    import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}
