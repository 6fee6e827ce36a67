"""Rendering preflight: which MuJoCo GL backends render here (each probed in a fresh, bounded
subprocess), and the fix for those that don't.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_hud.errors import HudError

__all__ = [
    "BACKENDS",
    "HIDE_VAR",
    "Backend",
    "Probe",
    "RenderError",
    "main",
    "preflight",
    "probe",
    "probe_all",
]

HIDE_VAR = "PYTEST_HUD_GL_HIDE"


@dataclass(frozen=True)
class Backend:
    """A MuJoCo GL backend: the variables that select it and the packages it needs."""

    name: str
    env: Mapping[str, str]
    apt: tuple[str, ...]
    headless: bool
    note: str = ""

    @property
    def exports(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.env.items())

    def fix(self) -> str:
        text = f"apt-get install -y {' '.join(self.apt)}; export {self.exports}"
        return f"{text} ({self.note})" if self.note else text


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "egl",
            {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"},
            ("libegl1", "libegl-mesa0", "libgl1-mesa-dri", "libgbm1", "libgl1"),
            headless=True,
            note="GPU driver's EGL on GPU machines, Mesa llvmpipe otherwise; PyOpenGL "
            "loads libGL too",
        ),
        Backend(
            "osmesa",
            {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"},
            ("libosmesa6",),
            headless=True,
            note="software rendering, CPU only",
        ),
        Backend(
            "glfw",
            {"MUJOCO_GL": "glfw"},
            ("libglfw3", "libgl1", "xvfb"),
            headless=False,
            note="needs an X display: run under xvfb-run, or use egl/osmesa",
        ),
    )
}

#: Runs in the probe subprocess: hide libraries if asked, render one frame, print JSON.
_PROBE = r"""
import ctypes, json, os, sys
hidden = [h for h in os.environ.get("PYTEST_HUD_GL_HIDE", "").split(",") if h]
if hidden:
    _init = ctypes.CDLL.__init__
    def _guarded(self, name, *args, **kwargs):
        base = os.path.basename(str(name or ""))
        if any(base.startswith(h) for h in hidden):
            raise OSError(f"{base}: cannot open shared object file: No such file or directory"
                          " (hidden by PYTEST_HUD_GL_HIDE)")
        _init(self, name, *args, **kwargs)
    ctypes.CDLL.__init__ = _guarded
import mujoco
xml = '''<mujoco><worldbody><light pos="0 0 2"/>
<camera name="eye" pos="0 -1 0.5" xyaxes="1 0 0 0 0.45 0.9"/>
<geom type="box" size="0.2 0.2 0.2" rgba="0.9 0.2 0.2 1"/></worldbody></mujoco>'''
model = mujoco.MjModel.from_xml_string(xml)
data = mujoco.MjData(model)
mujoco.mj_forward(model, data)
renderer = mujoco.Renderer(model, 32, 32)
renderer.update_scene(data, camera="eye")
img = renderer.render()
print("PYTEST_HUD_PROBE " + json.dumps({"shape": list(img.shape), "std": float(img.std())}))
sys.stdout.flush()
os._exit(0)  # skip GL context destructors (EGL prints a harmless error from them)
"""


class RenderError(HudError, RuntimeError):
    """No MuJoCo GL backend can render here; the message names the fix."""


@dataclass
class Probe:
    """One backend's probe: did it render a non-blank frame, and if not, why."""

    backend: Backend
    ok: bool
    seconds: float
    error: str = ""

    def line(self) -> str:
        b = self.backend
        kind = "headless" if b.headless else "needs a display"
        if self.ok:
            return f"  ok    {b.name:<7} ({kind}, {self.seconds:.1f} s)  use: export {b.exports}"
        fix = "pip install mujoco" if "No module named 'mujoco'" in self.error else b.fix()
        return f"  FAIL  {b.name:<7} ({kind}): {self.error}\n        fix: {fix}"


def probe(name: str, *, timeout: float = 60.0, env: Mapping[str, str] | None = None) -> Probe:
    """Render one small frame with backend ``name`` in a fresh subprocess (bounded)."""
    backend = BACKENDS[name]
    child_env = {**os.environ, **(env or {}), **backend.env}
    if not backend.headless and not child_env.get("DISPLAY"):
        return Probe(backend, False, 0.0, "no X display (DISPLAY is unset)")
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=child_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        took = time.monotonic() - start
        return Probe(backend, False, took, f"no frame within {timeout:.0f} s (probe killed)")
    took = time.monotonic() - start
    for line in proc.stdout.splitlines():
        if line.startswith("PYTEST_HUD_PROBE "):
            frame = json.loads(line.split(" ", 1)[1])
            if frame["std"] > 0:
                return Probe(backend, True, took)
            return Probe(backend, False, took, "rendered a blank frame")
    return Probe(backend, False, took, _last_error(proc.stderr, proc.returncode))


def _last_error(stderr: str, code: int) -> str:
    """The exception line of a traceback (the part that says what broke), else the tail."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln.split(":", 1)[0] or "Exception" in ln.split(":", 1)[0]:
            return ln[:300]
    return (lines[-1][:300] if lines else "") or f"probe exited with code {code} and no output"


def probe_all(names: Sequence[str] | None = None, *, timeout: float = 60.0) -> list[Probe]:
    return [probe(n, timeout=timeout) for n in (names or list(BACKENDS))]


#: what doctor prints where the Python package is absent: no GL package can help then
MISSING_MUJOCO = (
    "MuJoCo is not installed in this Python ({python}): no backend can render.\n"
    "fix: pip install mujoco (or pip install 'pytest-hud[metaworld]', which brings it);\n"
    "     then run python -m pytest_hud doctor again for the GL packages"
)

_PREFLIGHT: dict[tuple[str, ...], str | RenderError] = {}


def mujoco_here() -> bool:
    """Whether this interpreter can import MuJoCo (without importing it)."""
    return importlib.util.find_spec("mujoco") is not None


def preflight(*, timeout: float = 60.0) -> str | None:
    """The backend sims should render with; exported as ``MUJOCO_GL``/``PYOPENGL_PLATFORM``
    for processes spawned afterwards. Raises :class:`RenderError` with the fix otherwise.
    None, probing nothing, where MuJoCo is not installed: no sim renders here."""
    if not mujoco_here():
        return None
    chosen = os.environ.get("MUJOCO_GL", "")
    key = (chosen, os.environ.get("PYOPENGL_PLATFORM", ""), os.environ.get(HIDE_VAR, ""))
    if key not in _PREFLIGHT:
        _PREFLIGHT[key] = _choose(chosen, timeout)
    outcome = _PREFLIGHT[key]
    if isinstance(outcome, RenderError):
        raise outcome
    for var, value in BACKENDS[outcome].env.items():
        os.environ.setdefault(var, value)
    return outcome


def _choose(chosen: str, timeout: float) -> str | RenderError:
    if chosen and chosen not in BACKENDS:
        return RenderError(
            f"MUJOCO_GL={chosen!r}: expected one of {sorted(BACKENDS)}. Fix: unset it "
            "or set MUJOCO_GL=egl (or osmesa)"
        )
    names = [chosen] if chosen else [n for n, b in BACKENDS.items() if b.headless]
    probes = [probe(n, timeout=timeout) for n in names]
    for p in probes:
        if p.ok:
            return p.backend.name
    detail = "; ".join(f"{p.backend.name}: {p.error}" for p in probes)
    fixes = " | or | ".join(p.backend.fix() for p in probes)
    return RenderError(
        f"cameras are on but MuJoCo cannot render here (expected a frame from "
        f"{'/'.join(names)}; got {detail}). Fix: {fixes}; or run state-only (no cameras). "
        "`python -m pytest_hud doctor` shows every backend"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_hud doctor [--timeout S] [BACKEND ...]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pytest_hud doctor", description=__doc__)
    parser.add_argument("backends", nargs="*", help=f"any of {', '.join(BACKENDS)} (default: all)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per probe")
    args = parser.parse_args(argv)
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; expected any of {list(BACKENDS)}")
    if not mujoco_here():
        print(MISSING_MUJOCO.format(python=sys.executable))
        return 1
    print("MuJoCo rendering backends (one 32x32 frame each, in a fresh process):")
    probes = probe_all(args.backends or None, timeout=args.timeout)
    for p in probes:
        print(p.line())
    good = [p.backend.name for p in probes if p.ok and p.backend.headless]
    if good:
        print(f"headless rendering works: {', '.join(good)}")
        return 0
    print("no headless backend renders: cameras will fail; install one fix above")
    return 1
