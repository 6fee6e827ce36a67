"""The docs: the site builds strictly, its generated reference matches the code, every
quickstart command runs, the README stays short, and no module docstring claims a
machine's measured figure (those live in docs/performance.md)."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from needs import require
from paths import ROOT

DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent


def env() -> dict[str, str]:
    """This venv first on PATH and this tree first on the import path."""
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "NO_MKDOCS_2_WARNING": "1",
    }


def gen_reference() -> ModuleType:
    path = ROOT / "scripts" / "gen_reference.py"
    spec = importlib.util.spec_from_file_location("gen_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the site --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` of the repo's site (broken links and anchors fail it)."""
    has = importlib.util.find_spec("mkdocs") and importlib.util.find_spec("material")
    require(has, "mkdocs and mkdocs-material", "pip install -e '.[dev]' (scripts/setup)")
    out = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", out]
    done = subprocess.run(
        cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


def test_site_builds_strictly(site: Path) -> None:
    for page in ("index.html", "quickstart/index.html", "performance/index.html"):
        assert (site / page).is_file(), page


def test_options_page_lists_every_hud_option_pytest_knows(site: Path, tmp_path: Path) -> None:
    help_ = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    known = set(re.findall(r"(--hud-[a-z0-9-]+)", help_))
    assert "--hud-runtime" in known, help_[-2000:]
    generated = {f for row in gen_reference().hud_options() for f in row["flags"]}
    assert known == generated, f"pytest knows {known - generated}; table has {generated - known}"
    page = (site / "reference/options/index.html").read_text()
    missing = sorted(f for f in known if f"<code>{f}</code>" not in page)
    assert not missing, f"the built options page lacks {missing}"


def test_errors_page_draws_the_whole_tree(site: Path) -> None:
    page = (site / "reference/errors/index.html").read_text()
    classes = gen_reference().error_classes()
    assert "HudError" in classes and len(classes) > 10
    missing = sorted(name for name in classes if f"<code>{name}</code>" not in page)
    assert not missing, f"the built errors page lacks {missing}"


def test_the_error_module_draws_the_whole_tree() -> None:
    """pytest_hud/errors.py's docstring draws the hierarchy by hand (as httpx's
    _exceptions.py): every HudError subclass the code defines is on it."""
    import pytest_hud.errors

    drawn = set(re.findall(r"[\u2500\s](\w+)(?: \(|\s+\[|\n|$)", pytest_hud.errors.__doc__ or ""))
    missing = sorted(set(gen_reference().error_classes()) - drawn - {"HudError"})
    assert not missing, f"pytest_hud/errors.py's tree lacks {missing}"


# -- the quickstart --------------------------------------------------------------------------
@dataclass
class Block:
    how: str  # "run", "skip", "background" or "docker"
    script: str
    ready: str = ""


def quickstart_blocks() -> list[Block]:
    """The fenced ``bash`` blocks of docs/quickstart.md with the HTML comment that tells
    how to run each (``<!-- quickstart: skip ... -->``, ``background until TEXT``,
    ``needs docker``; none: run it)."""
    text = (DOCS / "quickstart.md").read_text()
    blocks = []
    for m in re.finditer(r"(?:<!-- quickstart: (.*?) -->\n)?```bash\n(.*?)```", text, re.S):
        note, script = (m.group(1) or "").strip(), m.group(2)
        if note.startswith("skip"):
            blocks.append(Block("skip", script))
        elif note.startswith("background until "):
            blocks.append(Block("background", script, note.removeprefix("background until ")))
        elif note == "needs docker":
            blocks.append(Block("docker", script))
        else:
            assert not note, f"unknown quickstart note {note!r}"
            blocks.append(Block("run", script))
    return blocks


def docker_reachable() -> bool:
    try:
        import docker

        docker.from_env(timeout=20).ping()
    except Exception:
        return False
    return True


@contextlib.contextmanager
def background(block: Block, cwd: Path) -> Iterator[None]:
    """Start ``block``, wait (bounded) for its ready line, stop it with SIGINT after."""
    proc = subprocess.Popen(
        ["bash", "-c", block.script],
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if block.ready in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        ok = ready.wait(120)
        assert ok, f"{block.script!r} never printed {block.ready!r}:\n{''.join(seen)[-3000:]}"
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        reader.join(10)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(2400)  # a cold docker image build is minutes; each other block seconds
def test_every_quickstart_command_runs(tmp_path: Path) -> None:
    blocks = quickstart_blocks()
    assert sum(b.how != "skip" for b in blocks) >= 4, "the quickstart lost its commands"
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    with contextlib.ExitStack() as servers:
        for block in blocks:
            if block.how == "skip":
                continue
            if block.how == "background":
                servers.enter_context(background(block, tmp_path))
                continue
            if block.how == "docker":
                require(docker_reachable(), "a Docker engine", "start one with .ci/docker-up")
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", block.script],
                cwd=tmp_path,
                env=env(),
                capture_output=True,
                text=True,
                timeout=1800 if block.how == "docker" else 600,
                check=False,
            )
            assert done.returncode == 0, (
                f"quickstart command failed (exit {done.returncode}):\n{block.script}\n"
                f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            )


# -- the README ------------------------------------------------------------------------------
def test_readme_is_short_and_starts_with_the_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 8 * 1024, f"README.md is {len(readme.encode())} bytes"
    first = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert first is not None and readme.index("```bash") < readme.index("\n## ")
    commands = first.group(1).strip().splitlines()
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci/run").read_text().strip().splitlines()
    assert commands[1] in ci, "the README's test command is not one .ci/run runs"
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if "://" not in link:
            assert (ROOT / link).exists(), f"README.md links to {link}, which does not exist"


def test_the_readme_tour_runs_as_written_and_ends_as_it_says(tmp_path: Path) -> None:
    """The tour's two files, under the names it gives them, in one empty folder, and its
    command run there: the random agent fails every episode and the gate, exit code 1."""
    readme = (ROOT / "README.md").read_text()
    tour = readme[readme.index("## A tour") : readme.index("\n## ", readme.index("## A tour") + 1)]
    files, start = {}, 0
    for block in re.finditer(r"```python\n(.*?)```", tour, re.S):  # each under the name
        named = re.findall(r"`(\w+\.py)`", tour[start : block.start()])  # given before it
        assert len(named) == 1, f"the tour names no single file for:\n{block.group(1)}"
        files[named[0]] = block.group(1)
        start = block.end()
    assert sorted(files) == ["pendulum.py", "test_swing_up.py"], sorted(files)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    command = re.findall(r"```bash\n(.*?)```", tour, re.S)
    assert len(command) == 1 and command[0].startswith("pytest "), command
    done = subprocess.run(
        command[0], shell=True, cwd=tmp_path, env=env(), capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-4000:]
    assert re.search(r"= 10 failed in ", out), out[-4000:]
    assert "success rate 0.0% (0/10) vs required 80.0%" in out, out[-4000:]
    assert (tmp_path / "report.html").stat().st_size > 0


# -- no measured figures in module docstrings ------------------------------------------------
#: a number with a unit of time, speed, size or ratio
FIGURE = re.compile(
    r"(?<![\w.])~?\d[\d,]*(?:\.\d+)?\s?(?:ms|µs|us|s|x|%|steps/s|fps|[KMG]B|min)(?!\w)"
)
#: what turns a figure into a claim about one machine on one day
CLAIM = re.compile(
    r"\b(?:here|measured|measures|this machine|on a (?:quiet|loaded)|quiet|loaded|load average"
    r"|load \d|faster|slower|took|as long|bench)\b|~\d"
    r"|\d\s?(?:ms|s)\s+(?:against|vs\.?|versus)\s+\d",
    re.I,
)
#: statistics, not measurements
NOT_A_FIGURE = re.compile(r"Wilson 95%|95% (?:Wilson|confidence|interval|CI|error bars|bars)")


def figure_claims(doc: str) -> list[str]:
    text = NOT_A_FIGURE.sub("", " ".join(doc.split()))
    sentences = re.split(r"(?<=[.;!?])\s+", text)
    return [s for s in sentences if FIGURE.search(s) and CLAIM.search(s)]


def test_figure_claims_are_recognised() -> None:
    assert figure_claims("A frame costs ~90 ms to encode here.")
    assert figure_claims("The halves won: 40.3 s against 43.4 s.")
    assert figure_claims("Measured on PushT: 76 forwards and 41.0 s.")
    assert figure_claims("Ours is 1.8x faster.")
    assert not figure_claims("Every wait is bounded (10 s by default); a timeout is an error.")
    assert not figure_claims("Success rates with Wilson 95% bars, one colour per run.")


def test_no_docstring_claims_a_measured_figure() -> None:
    """Module, class and function docstrings state contracts and reasons; what was
    measured on one machine on one day belongs to docs/performance.md."""
    offenders = {}
    for path in sorted((ROOT / "pytest_hud").rglob("*.py")):
        tree = ast.parse(path.read_text())
        nodes = [tree] + [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        for node in nodes:
            claims = figure_claims(ast.get_docstring(node) or "")
            if claims:
                where = getattr(node, "name", "module")
                offenders[f"{path.relative_to(ROOT)}: {where}"] = claims
    listing = "\n".join(
        f"{name}:\n" + "\n".join(f"    {c[:160]}" for c in claims)
        for name, claims in offenders.items()
    )
    assert not offenders, (
        f"{len(offenders)} docstrings hold measured figures; move them to "
        f"docs/performance.md (bench/_report.py) and keep the contract:\n{listing}"
    )


# -- bench/_report.py --------------------------------------------------------------------------
def test_bench_tables_are_written_once_and_replaced(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "_report.py")
    assert spec is not None and spec.loader is not None
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    page = tmp_path / "performance.md"
    page.write_text("# Performance\n\nhand-written text\n")
    # values no machine line can hold (it prints the load average, e.g. "1.0")
    for value in ("first-value", "second-value"):
        report.write_table(
            "demo", "Demo", ["a", "b|c"], [["x", value]], argv=["bench/x.py"], path=page
        )
    report.write_table("other", "Other", ["a"], [["y"]], argv=["bench/y.py"], path=page)
    text = page.read_text()
    assert text.count("<!-- bench:demo -->") == 1 and "| x | second-value |" in text
    assert "first-value" not in text
    assert "hand-written text" in text and text.index("bench:demo") < text.index("bench:other")
    assert "- command: `python bench/x.py`" in text and "b\\|c" in text
    assert re.search(r"- machine: \d+ cores, .+, Python \d", text)
    with pytest.raises(ValueError, match="lowercase"):
        report.write_table("Bad Name", "t", ["a"], [], path=page)


def _table_after(text: str, heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first markdown table after the line ``heading``."""
    rest = text.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(rest) if line.startswith("| "))
    rows = []
    for line in rest[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def test_the_accounted_for_tables_name_every_benchmark_and_count_them_truly() -> None:
    """The suites guide's accounted-for tables: one row for each of vla-eval's benchmarks,
    the counts under the tables are the rows' own, and every test named as what shows a row
    is a test of this suite."""
    spec = importlib.util.find_spec("vla_eval")
    require(spec and spec.origin, "vla-eval", "run scripts/setup --vla-eval")
    assert spec is not None and spec.origin is not None
    text = (DOCS / "guides" / "suites.md").read_text()
    bench = _table_after(text, "vla-eval 0.8.0 (")
    lerobot = _table_after(text, "LeRobot 0.6.1 (")
    shipped = sorted(
        p.parent.name for p in Path(spec.origin).parent.glob("benchmarks/*/benchmark.py")
    )
    assert sorted(row[0] for row in bench) == shipped

    def tally(rows: list[list[str]]) -> dict[str, int]:
        kinds = {"runs": 0, "download": 0, "GPU": 0, "not tried here": 0}
        for row in rows:
            kind = next((k for k in kinds if row[1].startswith(k)), None)
            assert kind is not None, f"row {row[0]}: status {row[1]!r} is none of {list(kinds)}"
            kinds[kind] += 1
        return kinds

    b, le = tally(bench), tally(lerobot)
    counts = re.sub(r"\s+", " ", text.split("Counts: ", 1)[1].split("\n\n", 1)[0])
    assert (
        f"vla-eval {len(bench)} = {b['runs']} run here + {b['download']} need a download + "
        f"{b['GPU']} need a GPU + {b['not tried here']} not tried" in counts
    ), counts
    assert (
        f"LeRobot {len(lerobot)} = {le['runs']} run here + {le['download']} need a download + "
        f"{le['GPU']} need a GPU" in counts
    ), counts
    assert le["not tried here"] == 0
    defined = {
        node.name
        for path in (ROOT / "tests").rglob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    for row in bench + lerobot:
        for name in re.findall(r"`(test_\w+)", row[2]):
            assert name in defined, f"row {row[0]}: {name} is not a test here"
        for path in re.findall(r"`(tests/[\w/]+\.py)`", row[2]):
            assert (ROOT / path).is_file(), f"row {row[0]}: {path} does not exist"
        if row[1].startswith("runs"):
            assert row[2] != "-", f"row {row[0]} runs here, yet no test shows it"
