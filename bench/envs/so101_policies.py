"""Reach policies for bench/robots.py on the physics SO-101 (tests/helpers/lerobot_robot_so101_sim):
the scripted reach-and-close command repeated over a chunk (``repeat``), or planned over it
(``plan``: each action of the chunk is the scripted command on the state the arm would be
in had the earlier ones been executed, so a chunk walks to the cube and stops there), and
a fixed inference time (``delay`` seconds of sleep per forward). Imported by the bench and
by its vla-eval model server (so101_vla_server.py)."""

from __future__ import annotations

import time

import numpy as np
from lerobot_robot_so101_sim import _so101, reach_close_action
from policy_models import ReachModel

from pytest_hud.robot.agent.model import Model


def plan_chunk(state: np.ndarray, horizon: int, scale: float = 1.0) -> np.ndarray:
    """``[horizon, 4]``: the scripted command on ``state``, then on the state it leads to
    (the end effector moved by the command times the env's action scale), and so on;
    ``scale`` < 1 is a weaker arm (ReachModel's)."""
    _, policy, _ = _so101()
    s = np.asarray(state, np.float64).copy()
    out = []
    for _ in range(horizon):
        action = reach_close_action(s, scale)
        out.append(action)
        s[policy.EE_POS_SLICE] += np.asarray(action[:3], np.float64) * policy.DEFAULT_ACTION_SCALE
    return np.stack(out).astype(np.float32)


def chunk(state: np.ndarray, kind: str, horizon: int, scale: float = 1.0) -> np.ndarray:
    """One row's ``[horizon, 4]`` chunk of the ``kind`` policy."""
    if kind == "plan":
        return plan_chunk(state, horizon, scale)
    row = reach_close_action(np.asarray(state, np.float64), scale)
    return np.repeat(np.asarray(row, np.float32)[None], horizon, axis=0)


class PlannedReach(ReachModel):
    """ReachModel whose chunk is planned (see :func:`plan_chunk`) instead of one command
    repeated."""

    def infer(self, batch):
        states = np.asarray(batch["observation/state"], np.float64)
        return np.stack([plan_chunk(s, self.horizon, self.scale) for s in states])


class Slow(Model):
    """``inner`` with a fixed inference time: ``delay`` seconds of sleep per forward (a
    policy whose forward costs that much, on a thread beside the control loop)."""

    def __init__(self, inner: Model, delay: float) -> None:
        self.inner = inner
        self.delay = delay

    def infer(self, batch):
        t0 = time.monotonic()
        out = self.inner.infer(batch)
        left = self.delay - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)
        return out


def model(kind: str, horizon: int, delay: float = 0.0, scale: float = 1.0) -> Model:
    """``kind`` "repeat" (ReachModel) or "plan" (PlannedReach), ``delay`` s a forward."""
    cls = PlannedReach if kind == "plan" else ReachModel
    inner = cls(scale=scale, horizon=horizon)
    return Slow(inner, delay) if delay > 0 else inner


# -- Pendulum-v1 (bench/robots.py latency --pendulum) ----------------------------------------
def swing(th: float, thdot: float) -> float:
    """Energy-pumping swing-up with a PD catch near the top (Pendulum-v1: th = 0 upright,
    thddot = 15 sin th + 3 u, |u| <= 2)."""
    th = (th + np.pi) % (2 * np.pi) - np.pi
    if np.cos(th) > 0.85:
        return float(np.clip(-(12 * th + 2.5 * thdot), -2, 2))
    energy = 0.5 * thdot**2 + 15 * (np.cos(th) - 1)
    sign = np.sign(thdot) if thdot != 0 else 1.0
    return float(2.0 * sign * (1 if energy < 0 else -1))


class SwingUp(Model):
    """``horizon`` actions a forward: the swing-up command repeated (``plan`` False) or the
    controller rolled forward through the pendulum's own equations (``plan`` True)."""

    def __init__(self, horizon: int = 1, plan: bool = False) -> None:
        self.horizon, self.plan = horizon, plan

    def infer(self, batch):
        rows = []
        for cos, sin, thdot in np.asarray(batch["observation/state"], np.float64):
            th, out = float(np.arctan2(sin, cos)), []
            for _ in range(self.horizon):
                u = swing(th, thdot)
                out.append([u])
                if not self.plan:
                    out = out * self.horizon
                    break
                thdot = float(np.clip(thdot + (15 * np.sin(th) + 3 * u) * 0.05, -8, 8))
                th += thdot * 0.05
            rows.append(out)
        return np.asarray(rows, np.float32)
