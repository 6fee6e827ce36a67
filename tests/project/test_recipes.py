"""docs/contributing.md's two recipes, followed literally: the package is copied, each code
block titled with a path is written there (or, titled "(one line, in NAME)", inserted as the
last entry of that table), and pytest runs on the copy: a backend is one folder and one table
entry, a feature one module and one line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_hud

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "contributing.md"
BLOCK = re.compile(r'^```python title="(?P<title>[^"]+)"\n(?P<body>.*?)^```$', re.M | re.S)
LINE = re.compile(r"^(?P<path>\S+) \(one line, in (?P<table>\w+)\)$")

ENVS = """
from pytest_hud import Environment

env = Environment("recipe")
pole = env.gym("CartPole-v1", success_threshold=3)


@env.template()
async def balance(seed: int = 0):
    ep = await pole.reset(seed=seed)
    yield {"prompt": "balance the pole", "robot": {"token": ep["token"]}}
    yield await pole.result(token=ep["token"])
"""

TEST = """
import pytest

from envs import balance


@pytest.mark.hud(tasks=[balance.task(seed=s) for s in (1, 2, 3)])
def test_balance(hud_result):
    assert hud_result.success
"""


def blocks() -> list[tuple[str, str]]:
    found = [(m["title"], m["body"]) for m in BLOCK.finditer(GUIDE.read_text())]
    assert found, f"no titled python blocks in {GUIDE}"
    return found


def insert_entry(path: Path, table: str, line: str) -> None:
    """Add ``line`` as the last entry of the list or tuple assigned to ``table``."""
    lines = path.read_text().splitlines()
    start = next(i for i, text in enumerate(lines) if re.match(rf"{table}\b.*=", text))
    end = next(
        i
        for i in range(start + 1, len(lines))
        if lines[i].strip()[:1] in ("]", ")") and len(lines[i]) - len(lines[i].lstrip()) <= 4
    )
    indent = lines[end - 1][: len(lines[end - 1]) - len(lines[end - 1].lstrip())]
    lines.insert(end, indent + line.strip())
    path.write_text("\n".join(lines) + "\n")


def follow(tmp_path: Path, recipe: str) -> Path:
    """A copy of the package with the recipe's blocks (those naming ``recipe``'s paths)."""
    copy = tmp_path / "src"
    shutil.copytree(Path(pytest_hud.__file__).parent, copy / "pytest_hud")
    for title, body in blocks():
        entry = LINE.match(title)
        target = copy / (entry["path"] if entry else title)
        if recipe not in title and not (entry and recipe in body):
            continue
        if entry:
            insert_entry(target, entry["table"], body)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
    return copy


def run(copy: Path, suite: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "envs.py").write_text(ENVS)
    (folder / "test_balance.py").write_text(TEST)
    (folder / "pytest.ini").write_text(
        "[pytest]\npythonpath = .\naddopts = --hud-agent=zero --hud-max-steps=30\n"
    )
    return folder


def test_the_guide_has_both_recipes() -> None:
    titles = [title for title, _ in blocks()]
    assert any(t.startswith("pytest_hud/runtime/echo/") for t in titles), titles
    assert "pytest_hud/features/hello.py" in titles, titles
    assert sum(bool(LINE.match(t)) for t in titles) == 2, titles


def test_a_backend_is_one_folder_and_one_table_entry(tmp_path: Path, suite: Path) -> None:
    copy = follow(tmp_path, "echo")
    done = run(copy, suite, "--hud-runtime=echo")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "3 passed" in done.stdout, out
    assert "echo backend ready for echo" in done.stderr, out  # its preflight ran
    helped = run(copy, suite, "--help")
    assert "echo" in re.sub(r"\s+", " ", helped.stdout.split("--hud-runtime", 1)[1][:600])
    wrong = run(copy, suite, "--hud-runtime=ecco")
    assert wrong.returncode == 4, wrong.stdout + wrong.stderr
    assert "valid forms:" in wrong.stderr and "echo" in wrong.stderr, wrong.stderr


def test_a_feature_is_one_module_and_one_line(tmp_path: Path, suite: Path) -> None:
    copy = follow(tmp_path, "hello")
    plain = run(copy, suite)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "hello from" not in plain.stdout  # off unless asked for
    greeted = run(copy, suite, "--hud-hello")
    assert greeted.returncode == 0, greeted.stdout + greeted.stderr
    assert "hello from zero" in greeted.stdout, greeted.stdout
    (suite / "pytest.ini").write_text((suite / "pytest.ini").read_text() + "hud_hello = true\n")
    from_ini = run(copy, suite)  # the flag's ini, from the same table
    assert "hello from zero" in from_ini.stdout, from_ini.stdout + from_ini.stderr
