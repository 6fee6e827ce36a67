"""vla-eval's own benchmark classes (not a test helper's) as envs, each in the image
``--hud-runtime=docker`` builds from its env module's requirements, graded: vla-eval 0.8's
Kinetix benchmark (``pytest_hud.suites.kinetix.vla_eval``: kinetix-env on JAX, CPU).

A real pytest run in a subprocess, a real engine, the image built (or found: scripts/setup
--all prebuilds it) from the module's REQUIRES; a large Kinetix level's step compiles in the
container (~30 s quiet, minutes on a loaded machine), so the episode is short.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from docker_helpers import engine
from needs import require

pytestmark = [pytest.mark.vla_eval, pytest.mark.docker]


@pytest.mark.timeout(3600)  # a cold image: pip of JAX and kinetix-env, a 1.4 GB layer
def test_vla_evals_kinetix_benchmark_is_graded_in_its_own_image(
    pytester: pytest.Pytester,
) -> None:
    require(importlib.util.find_spec("vla_eval"), "vla-eval", "run scripts/setup --all")
    require(engine(), "a Docker engine", "start one with .ci/docker-up (or scripts/setup --docker)")
    from pytest_hud.suites.kinetix.vla_eval import OFFLINE_TASKS, rows

    unicycle = [r for r in rows() if r["args"]["task"]["level"] == "h17_unicycle"]
    assert len(unicycle) == 1 and len(OFFLINE_TASKS) == 8
    pytester.path.joinpath("rtc.jsonl").write_text(json.dumps(unicycle[0]) + "\n")
    result = pytester.runpytest_subprocess(
        "rtc.jsonl",
        "-p",
        "no:cacheprovider",
        "--hud-runtime=docker",
        "--hud-agent=random",
        "--hud-max-steps=8",
        "--hud-results=results.json",
        timeout=3000,
    )
    out = json.loads(pytester.path.joinpath("results.json").read_text())
    (row,) = out["rollouts"]
    assert row["error_type"] is None, row.get("error")
    assert row["steps"] == 8 and row["prompt"] == "Unicycle"
    assert isinstance(row["success"], bool)  # vla-eval's verdict: any step's reward > 0
    assert row["total_reward"] is not None
    assert result.ret in (0, 1), result.stdout.str()[-3000:]  # graded: passed or failed
