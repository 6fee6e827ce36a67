"""Golden replay verdicts: does the env reproduce a recorded episode (:func:`compare_env`), and
does the policy act as recorded on its observations (:func:`compare_policy`)? Errors are in
units of each dimension's spread; pure functions of arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DimError",
    "EnvCheck",
    "PolicyCheck",
    "Tolerances",
    "compare_env",
    "compare_policy",
    "dim_labels",
    "format_table",
    "image_error",
    "scale",
]


@dataclass(frozen=True)
class Tolerances:
    """``env``: per step and dimension, in dataset standard deviations; ``image``: a
    camera frame's mean absolute error as a fraction of 255; ``policy``: a dimension's
    mean error over the episode, in dataset standard deviations (also the per-step
    threshold its "first step past" reports)."""

    env: float = 0.05
    image: float = 0.1
    policy: float = 1.0


def scale(std: np.ndarray | None, values: np.ndarray, span: np.ndarray | None = None) -> np.ndarray:
    """Per-dimension units: the dataset's standard deviation (else ``values``'), floored
    at 1e-3 of the largest one and at 1% of ``span`` (a declared range, e.g. an action's
    max - min), so a dimension the recording kept constant is not divided by ~0."""
    sd = np.asarray(std if std is not None else np.std(values, axis=0), np.float64).reshape(-1)
    floor = np.full(sd.shape, max(1e-3 * float(sd.max(initial=0.0)), 1e-9))
    if span is not None:
        floor = np.maximum(floor, 0.01 * np.abs(np.asarray(span, np.float64).reshape(-1)))
    return np.maximum(sd, floor)


def dim_labels(key: str, size: int, names: Sequence[str] | None = None) -> list[str]:
    """How a dimension is named in verdicts: the feature's own names, else ``key[i]``."""
    if names is not None and len(names) == size:
        return [str(n) for n in names]
    return [f"{key}[{i}]" for i in range(size)]


def image_error(live: np.ndarray, recorded: np.ndarray) -> float:
    """A frame's mean absolute pixel error as a fraction of 255 (0: identical)."""
    if live.shape != recorded.shape:
        return 1.0
    return float(np.abs(live.astype(np.float32) - recorded.astype(np.float32)).mean() / 255.0)


def _round(values: np.ndarray) -> list[float]:
    return [float(f"{v:.4g}") for v in np.asarray(values, np.float64).reshape(-1)]


# -- env replay -------------------------------------------------------------------------
@dataclass
class EnvCheck:
    reproduces: bool
    verdict: str
    steps: dict[str, int]  # recorded / replayed
    success: dict[str, bool | None]
    terminated: dict[str, bool]
    first_drift_step: int | None
    max_error: float
    max_error_feature: str | None
    max_error_step: int | None
    #: per step, the largest error over every dimension (dataset standard deviations)
    error: list[float] = field(default_factory=list)
    image_error: dict[str, list[float]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def compare_env(
    recorded: Mapping[str, np.ndarray],
    live: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    labels: Mapping[str, Sequence[str]],
    *,
    steps: tuple[int, int],
    success: tuple[bool | None, bool | None],
    terminated: tuple[bool, bool],
    images: Mapping[str, np.ndarray] | None = None,
    tol: Tolerances | None = None,
) -> EnvCheck:
    """The env replay's check. ``recorded``/``live``: per dataset key ``[T, D]``;
    ``units``: per key ``[D]`` (:func:`scale`); ``labels``: per key the dimension names;
    ``steps``, ``success``, ``terminated``: (recorded, replayed); ``images``: per camera
    the replayed frames' :func:`image_error`."""
    tol = tol or Tolerances()
    n = min(steps)
    missing = sorted(set(recorded) ^ set(live))
    per_step = np.zeros(n)
    worst: tuple[float, str | None, int | None] = (0.0, None, None)  # error, label, step
    first: int | None = None
    first_label: str | None = None
    for key in sorted(set(recorded) & set(live)):
        rec, got = np.asarray(recorded[key], np.float64), np.asarray(live[key], np.float64)
        if rec.shape[1:] != got.shape[1:]:
            missing.append(
                f"{key} (shape {list(rec.shape[1:])} recorded, {list(got.shape[1:])} now)"
            )
            continue
        err = np.abs(got[:n] - rec[:n]) / units[key]
        if not err.size:
            continue
        per_step = np.maximum(per_step, err.max(axis=1))
        t, d = np.unravel_index(int(np.argmax(err)), err.shape)
        if err[t, d] > worst[0]:
            worst = (float(err[t, d]), labels[key][int(d)], int(t))
        past = np.argwhere(err > tol.env)
        if len(past) and (first is None or past[0][0] < first):
            first, first_label = int(past[0][0]), labels[key][int(past[0][1])]
    pixel = {k: np.asarray(v, np.float64)[:n] for k, v in (images or {}).items()}
    for key, frame_err in pixel.items():
        over = np.flatnonzero(frame_err > tol.image)
        if len(over) and (first is None or over[0] < first):
            first, first_label = int(over[0]), f"{key} (mean pixel error {frame_err[over[0]]:.2f})"
    same = steps[0] == steps[1] and success[0] == success[1] and terminated[0] == terminated[1]
    reproduces = first is None and same and not missing
    check = EnvCheck(
        reproduces=reproduces,
        verdict="",
        steps={"recorded": steps[0], "replayed": steps[1]},
        success={"recorded": success[0], "replayed": success[1]},
        terminated={"recorded": terminated[0], "replayed": terminated[1]},
        first_drift_step=first,
        max_error=float(f"{worst[0]:.4g}"),
        max_error_feature=worst[1],
        max_error_step=worst[2],
        error=_round(per_step),
        image_error={k: _round(v) for k, v in pixel.items()},
        missing=missing,
    )
    check.verdict = _env_verdict(check, first_label, tol)
    return check


def _env_verdict(check: EnvCheck, first_label: str | None, tol: Tolerances) -> str:
    worst = (
        f"max error {check.max_error:.3g} std on {check.max_error_feature} at step "
        f"{check.max_error_step}"
        if check.max_error_feature is not None
        else "max error 0"
    )
    if check.reproduces:
        return (
            f"env reproduces ({check.steps['recorded']} steps, success "
            f"{check.success['recorded']}, {worst})"
        )
    parts = []
    if check.first_drift_step is not None:
        parts.append(
            f"env drifts at step {check.first_drift_step} ({first_label} past {tol.env:g} std; "
            f"{worst})"
        )
    else:
        parts.append(f"env drifts ({worst})")
    rec, rep = check.steps["recorded"], check.steps["replayed"]
    if rec != rep or check.terminated["recorded"] != check.terminated["replayed"]:
        end = {True: "ended", False: "still running"}
        parts.append(
            f"episode {end[check.terminated['recorded']]} after {rec} steps recorded, "
            f"{end[check.terminated['replayed']]} after {rep} replayed"
        )
    if check.success["recorded"] != check.success["replayed"]:
        parts.append(
            f"success {check.success['recorded']} recorded, {check.success['replayed']} replayed"
        )
    if check.missing:
        parts.append(f"features differ: {', '.join(check.missing)}")
    return "; ".join(parts)


# -- policy open loop ---------------------------------------------------------------------
@dataclass
class DimError:
    dim: int
    name: str
    mean: float
    max: float
    first_past: int | None


@dataclass
class PolicyCheck:
    matches: bool
    verdict: str
    dims: list[DimError]
    diverging: list[int]
    cause: str | None
    #: per step and action dimension, the error (dataset standard deviations)
    error: list[list[float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _dims(err: np.ndarray, names: Sequence[str], tol: float) -> list[DimError]:
    out = []
    for d in range(err.shape[1]):
        past = np.flatnonzero(err[:, d] > tol)
        out.append(
            DimError(
                dim=d,
                name=names[d],
                mean=float(f"{err[:, d].mean():.4g}") if len(err) else 0.0,
                max=float(f"{err[:, d].max():.4g}") if len(err) else 0.0,
                first_past=int(past[0]) if len(past) else None,
            )
        )
    return out


def compare_policy(
    predicted: np.ndarray,
    recorded: np.ndarray,
    units: np.ndarray,
    names: Sequence[str],
    *,
    probes: Mapping[str, np.ndarray] | None = None,
    tol: Tolerances | None = None,
) -> PolicyCheck:
    """The open loop's check. ``predicted``/``recorded``: ``[T, A]``; ``units``: ``[A]``
    (:func:`scale`); ``probes``: a description of a changed input (``"camera 'x' flipped
    vertically"``) -> the policy's actions under it, tried in order when it diverges."""
    tol = tol or Tolerances()
    pred, rec = np.asarray(predicted, np.float64), np.asarray(recorded, np.float64)
    err = np.abs(pred - rec) / units
    dims = _dims(err, names, tol.policy)
    diverging = [d.dim for d in dims if d.mean > tol.policy]
    cause = _cause(pred, rec, units, names, diverging, probes or {}, tol.policy)
    check = PolicyCheck(
        matches=not diverging,
        verdict="",
        dims=dims,
        diverging=diverging,
        cause=cause,
        error=[_round(row) for row in err],
    )
    check.verdict = _policy_verdict(check, tol)
    return check


def _explains(
    alt: np.ndarray, rec: np.ndarray, units: np.ndarray, dims: list[int], tol: float
) -> bool:
    """Whether ``alt`` matches ``rec`` on every dim of ``dims``. A dim the recording kept
    (nearly) constant must match within a quarter of the tolerance: there any prediction
    of the opposite sign "matches negated" loosely (an untrained policy's constant does)."""
    for d in dims:
        flat = rec[:, d].std() < 0.1 * units[d]
        if (np.abs(alt[:, d] - rec[:, d]) / units[d]).mean() > (tol / 4 if flat else tol):
            return False
    return True


def _cause(
    pred: np.ndarray,
    rec: np.ndarray,
    units: np.ndarray,
    names: Sequence[str],
    diverging: list[int],
    probes: Mapping[str, np.ndarray],
    tol: float,
) -> str | None:
    """The convention that explains the divergence, if one does (see the module doc)."""
    if not diverging:
        return None
    if _explains(-pred, rec, units, diverging, tol):
        which = ", ".join(names[d] for d in diverging)
        verb = "matches" if len(diverging) == 1 else "match"
        if any("grip" in names[d].lower() for d in diverging):
            kind = "gripper polarity"
        elif diverging == [len(names) - 1]:
            kind = (
                "a sign convention (the last action dim: gripper polarity in most "
                "manipulation benchmarks)"
            )
        else:
            kind = "a sign convention"
        return f"{which} {verb} when negated: {kind}"
    for what, alt in probes.items():
        if _explains(np.asarray(alt, np.float64), rec, units, diverging, tol):
            return f"it matches with {what}: the policy sees that input transformed"
    return None


def _policy_verdict(check: PolicyCheck, tol: Tolerances) -> str:
    if check.matches:
        worst = max(check.dims, key=lambda d: d.mean, default=None)
        tail = f"; worst {worst.name}: mean {worst.mean:.3g}, max {worst.max:.3g}" if worst else ""
        return f"policy matches (mean error within {tol.policy:g} std on every dim{tail})"
    bad = [check.dims[d] for d in check.diverging]
    dims = ", ".join(
        f"{d.name} (mean {d.mean:.3g} std, first past {tol.policy:g} at step {d.first_past})"
        for d in bad
    )
    text = f"policy diverges on dims {[d.name for d in bad]}: {dims}"
    return f"{text}; {check.cause}" if check.cause else text


# -- reporting ------------------------------------------------------------------------------
def format_table(blocks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The terminal table (one line per episode) and one verdict line per episode."""
    head = (
        f"{'episode':>7}  {'task':<34} {'steps':>9} {'success':>11} {'env max':>8} "
        f"{'drift@':>6} {'policy mean':>11} {'diverging':<12}"
    )
    lines = [head]
    verdicts = []
    for b in blocks:
        env, pol = b.get("env") or {}, b.get("policy")
        steps = env.get("steps") or {}
        succ = env.get("success") or {}
        worst = max((d["mean"] for d in pol["dims"]), default=0.0) if pol else None
        lines.append(
            f"{b.get('episode')!s:>7}  {str(b.get('task'))[:34]:<34} "
            f"{steps.get('recorded')!s:>4}/{steps.get('replayed')!s:<4} "
            f"{_yn(succ.get('recorded'))}/{_yn(succ.get('replayed')):<5} "
            f"{env.get('max_error', 0.0):>8.3g} {_opt(env.get('first_drift_step')):>6} "
            f"{'-' if worst is None else f'{worst:.3g}':>11} "
            f"{_names(pol):<12}"
        )
        verdicts.append(f"episode {b.get('episode')}: {b.get('verdict')}")
    return lines + verdicts


def _yn(value: object) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _opt(value: object) -> str:
    return "-" if value is None else str(value)


def _names(policy: Mapping[str, Any] | None) -> str:
    if policy is None:
        return "(no agent)"
    bad = [policy["dims"][d]["name"] for d in policy.get("diverging") or []]
    return ",".join(bad) if bad else "none"
