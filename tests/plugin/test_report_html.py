"""The pytest-html report: the summary table with intervals and gate lines, the
per-item columns, the episode gallery, the success plot and the Figures section. One real
pytest session with pytest-html (a subprocess), over an env whose camera makes animations,
read by every test; pytester for the usage errors."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hud.commands import compare as compare_command

ENV = '''
import numpy as np
from pytest_hud import Environment
from pytest_hud.robot import RobotBridge, RobotEndpoint


class Dot(RobotBridge):
    """A camera that shows a dot; the episode succeeds when ``goal <= 0``."""

    contract = {"control_rate": 10, "features": {
        "observation/image": {"role": "observation", "type": "rgb",
                              "shape": [16, 16, 3], "dtype": "uint8"},
        "observation/state": {"role": "observation", "shape": [1]},
        "action": {"role": "action", "shape": [1], "stats": {"min": [-1], "max": [1]}}}}

    def reset(self, goal=0.0, seed=0):
        self.t, self.goal = 0, goal
        return f"reach {goal}"

    def step(self, actions):
        self.t += 1

    def get_observation(self):
        img = np.zeros((1, 16, 16, 3), np.uint8)
        img[0, 4 + self.t, 4:8] = 255
        state = np.zeros((1, 1), np.float32)
        return {"observation/image": img, "observation/state": state}, np.array([self.t >= 3])

    def result_slots(self):
        ok = self.goal <= 0
        return [{"score": float(ok), "success": ok, "total_reward": 0.0, "steps": self.t}]


env = Environment("dots")
sim = RobotEndpoint(Dot)
env.add_capability(sim)


@env.template()
async def reach(goal: float = 0.0, seed: int = 0):
    ep = await sim.reset(goal=goal, seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
'''

TESTS = """
import pytest
from dots_env import reach


@pytest.mark.hud(tasks=[reach.task(goal=g, seed=s) for s, g in enumerate([0.0, 1.0, 0.0])])
def test_reach(hud_result):
    assert hud_result.success, hud_result.summary()


@pytest.mark.hud(tasks=[reach.task(goal=2.0, seed=9)])
def test_runs_three_steps(hud_result):
    assert hud_result.steps == 3
"""


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real pytest-html session for the whole module (its own process, as pytester's
    runpytest_subprocess would start it): every test reads the same report."""
    root = tmp_path_factory.mktemp("report_html")
    (root / "dots_env.py").write_text(ENV)
    (root / "test_dots.py").write_text(TESTS)
    (root / "conftest.py").write_text("import dots_env  # noqa: F401\n")
    # a previous run's results and a per-checkpoint plot drawn from them, as a user makes it
    base = root / "base.json"
    rows = [{"env": "dots", "task_id": "reach", "args": {"goal": 0.0, "seed": s}, "seed": s,
             "success": s % 2 == 0} for s in range(4)]  # fmt: skip
    base.write_text(json.dumps({"rollouts": rows}))
    assert (
        compare_command.main([str(base), str(base), "--plot", str(root / "plots" / "ckpt.png")])
        == 0
    )
    argv = ["-p", "no:cacheprovider", "--hud-agent=zero", "--hud-min-success=0.9",
            "--html=report.html", "--self-contained-html", "--hud-report-image=plots/ckpt.png",
            f"--hud-compare={base}", f"--basetemp={root / 'tmp'}"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"} | {"PY_COLORS": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert "1 failed, 3 passed" in summary, done.stdout[-3000:] + done.stderr[-3000:]
    return root


@pytest.fixture
def report(report_dir: Path) -> str:
    return (report_dir / "report.html").read_text()


def _embedded(page: str, link: str) -> bytes:
    """The image the report embeds in the figure linking to ``link``."""
    found = re.search(
        rf'<figure class="hud-figure"><a href="{re.escape(link)}">'
        r'<img src="data:image/png;base64,([^"]+)"',
        page,
    )
    assert found, f"no embedded figure linking to {link}"
    return base64.b64decode(found.group(1))


def _summary_rows(page: str) -> dict[str, list[str]]:
    table = re.search(r'<table id="hud-summary-table">(.*?)</table>', page, re.S)
    assert table, "no hud summary table"
    out = {}
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S):
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        if cells:
            out[cells[0]] = cells[1:]
    return out


def test_summary_table_has_per_env_and_task_rows_with_intervals(report) -> None:
    rows = _summary_rows(report)
    # episodes, successes, rate, interval, mean score, mean steps, errors, xfail, skip
    assert rows["dots"][:3] == ["4", "2", "50%"]
    assert rows["dots/reach"][:3] == ["4", "2", "50%"]
    assert rows["overall"][:3] == ["4", "2", "50%"]
    assert rows["dots"][3] == "15%&ndash;85%"  # Wilson 95% for 2/4
    assert rows["dots"][5] == "3.0"  # mean steps
    assert 'onclick="hudSort(this)"' in report  # sortable headers
    gate = re.search(r'<p class="hud-gate fail">FAILED ([^<]*)</p>', report)
    assert gate and "overall" in gate.group(1) and "90.0%" in gate.group(1)


def test_items_have_hud_columns_and_a_consistent_success_cell(report) -> None:
    for name in ("Env", "Task", "Args", "Agent", "Success", "Score", "Steps", "Seconds"):
        assert f'class="sortable" data-column-type="hud{name}">{name}</th>' in report
    assert "goal=1.0, seed=1" in report
    # the Task cell is the row's task id (its args are the next cell), not a hash of them
    tasks = re.findall(r'col-hudTask\\?">([^<]*)<', html.unescape(report))
    assert len(tasks) == 4 and set(tasks) == {"reach"}, tasks
    # the test that checks only steps passes with a failed episode: the cell says why
    assert "no (not asserted by the test)" in report
    assert 'id="hud-env-filter"' in report and '<option value="dots">dots</option>' in report


def test_gallery_shows_every_episode_failures_first_linking_to_rows(report) -> None:
    figures = re.findall(r'<figure class="(ok|fail)"><a href="#" title="([^"]+)"', report)
    assert len(figures) == 4
    assert [cls for cls, _ in figures] == ["fail", "fail", "ok", "ok"]
    assert figures[0][1].startswith("test_dots.py::test_r")
    assert report.count("data:image/gif;base64,") >= 4
    svg = re.search(r"<svg [^>]*aria-label=\"success rate per task[^>]*>(.*?)</svg>", report)
    assert svg and "dots/reach" in svg.group(1) and "2/4" in svg.group(1)


def test_report_shows_and_links_the_given_plot_and_the_compare_plot(
    report: str, report_dir: Path
) -> None:
    assert "<h3>Figures</h3>" in report
    # --hud-report-image: the per-checkpoint plot, embedded byte for byte and linked
    # relative to the report
    assert _embedded(report, "plots/ckpt.png") == (report_dir / "plots/ckpt.png").read_bytes()
    assert '<figcaption>ckpt.png (<a href="plots/ckpt.png">' in report
    # --hud-compare: the plot it wrote beside the report is shown too
    plot = report_dir / "report.compare.png"
    assert _embedded(report, "report.compare.png") == plot.read_bytes()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--html=r.html", "--hud-report-image=missing.png"], "missing.png (does not exist)"),
        (["--html=r.html", "--hud-report-image=test_x.py"], "expected a PNG, GIF, JPEG or SVG"),
        (["--hud-report-image=plot.png"], "expected --html=REPORT, got none"),
    ],
)
def test_report_image_usage_errors_before_any_rollout(
    pytester: pytest.Pytester, args: list[str], expected: str
) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    (pytester.path / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert expected in result.stderr.str()
