"""What ``pip install 'pytest-hud[lerobot]'`` gives a user, asked of pip itself against the
package index (reachable in CI): on Python 3.11 the extra's lerobot specifier picks 0.4.4,
the newest release for that Python. (On 3.12, tests/project/test_extras.py installs the
extra into a clean venv and runs it.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from paths import ROOT

#: pip's dry-run fetches the metadata of every package in the extra's tree from the index
RESOLVE_TIMEOUT = 540

#: a plain ``--dry-run`` downloads every wheel it picks (over 2 GB for torch 2.11's CUDA tree, a
#: flaky download that once failed CI); ``fast-deps`` reads each wheel's metadata through HTTP
#: range requests instead, with the same resolver a user's ``pip install`` runs
LAZY_METADATA = "--use-feature=fast-deps"


def lerobot_requirement(python_version: str) -> Requirement:
    """The ``lerobot`` requirement of pyproject's ``lerobot`` extra that applies on
    ``python_version`` (one per Python: 0.4.4 on 3.11, 0.5+ with its extras on 3.12)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    env = {"python_version": python_version, "extra": ""}
    [req] = [
        Requirement(r)
        for r in extras["lerobot"]
        if Requirement(r).name == "lerobot"
        and (Requirement(r).marker is None or Requirement(r).marker.evaluate(env))
    ]
    return req


def dry_run(python: Path | str, report: Path, *requirements: str) -> dict[str, Version]:
    """What ``pip install`` would install for ``python`` from scratch (``--ignore-installed``:
    a fresh venv's answer, not the packages already there), without downloading the wheels:
    name -> version."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    done = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--dry-run",
            LAZY_METADATA,
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            *requirements,
        ],
        capture_output=True,
        text=True,
        timeout=RESOLVE_TIMEOUT,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, f"pip could not resolve {requirements}:\n{done.stderr[-3000:]}"
    installs = json.loads(report.read_text())["install"]
    return {i["metadata"]["name"].lower(): Version(i["metadata"]["version"]) for i in installs}


def test_the_lerobot_specifier_picks_0_4_4_on_python_311(tmp_path: Path) -> None:
    """The extra's lerobot specifier alone (``--no-deps``: which release pip takes for this
    Python; the 3.11 venv's torch comes from this machine's own wheels)."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip(f"the 3.11 answer needs Python 3.11; this is {sys.version.split()[0]}")
    requirement = lerobot_requirement("3.11")
    requirement.marker = None
    picked = dry_run(sys.executable, tmp_path / "report.json", "--no-deps", str(requirement))
    assert picked == {"lerobot": Version("0.4.4")}
