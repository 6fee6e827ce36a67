"""Experiment trackers: a results document becomes :class:`Figures` that each tracker named by
``--hud-log`` writes. Imported only when named; failures are warnings.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_hud.errors import HudError

if TYPE_CHECKING:
    from pytest_hud.evaluation.document import ResultsDocument, Row, Stats

__all__ = [
    "TRACKERS",
    "Figures",
    "Tracker",
    "TrackerError",
    "TrackerWarning",
    "figures_of",
    "log_figures",
    "parse_names",
]

#: ``--hud-log`` name -> the pip install that brings its library; the tracker itself is the
#: module of that name beside this one
TRACKERS: dict[str, str] = {
    "wandb": "pip install wandb",
    "tensorboard": "pip install tensorboard",
    "mlflow": "pip install mlflow-skinny",
    "trackio": "pip install trackio",
}


class TrackerError(HudError, ValueError):
    """A ``--hud-log`` value names no tracker."""


class TrackerWarning(HudError, UserWarning):
    """A tracker could not log; the evaluation's outcome is unchanged."""


@dataclass
class Figures:
    """What one evaluation logs: scalars by name, media paths by name, text fields."""

    step: int | None
    scalars: dict[str, float] = field(default_factory=dict)
    media: dict[str, Path] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)


class Tracker(Protocol):
    """One tracker backend: ``log`` one evaluation's figures, then ``close``."""

    name: str

    def log(self, figures: Figures) -> None: ...

    def close(self) -> None: ...


def parse_names(values: Iterable[str]) -> list[str]:
    """``--hud-log`` values (repeatable, comma-separated) as tracker names, in order."""
    names: list[str] = []
    for value in values:
        for name in filter(None, (v.strip() for v in value.split(","))):
            if name not in TRACKERS:
                raise TrackerError(
                    f"--hud-log={name}: expected one of {', '.join(TRACKERS)}; got {name!r}"
                )
            if name not in names:
                names.append(name)
    return names


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/]+", "_", text).strip("_") or "task"


def _stats(prefix: str, st: Stats | None, out: dict[str, float]) -> None:
    if not st:
        return
    for key in ("success_rate", "mean_score", "mean_steps", "episodes", "errors", "coverage"):
        value = st.get(key)
        if isinstance(value, int | float):
            out[f"{prefix}/{key}"] = float(value)
    interval = st.get("rate_ci") or st.get("wilson_95")  # rows as the units when known
    if interval:
        out[f"{prefix}/success_lo"], out[f"{prefix}/success_hi"] = map(float, interval)
    score = st.get("score_ci")
    if score:
        out[f"{prefix}/score_lo"], out[f"{prefix}/score_hi"] = map(float, score)


def figures_of(doc: ResultsDocument, step: int | None = None, media: int = 2) -> Figures:
    """A results document's figures: overall and per-task success and score with their
    bounds (rows as the units), steps, errors, coverage, each gate (1 passed, 0 failed),
    ``media`` episode videos per task (failures first) and the provenance (agent,
    checkpoint hash, image digest)."""
    out = Figures(step=step)
    _stats("hud", doc.get("overall"), out.scalars)
    for task, st in sorted((doc.get("per_task") or {}).items()):
        _stats(f"hud/task/{_slug(task)}", st, out.scalars)
    for gate in doc.get("gates") or []:
        out.scalars[f"hud/gate/{_slug(str(gate.get('name')))}"] = 1.0 if gate.get("passed") else 0.0
    picked: dict[str, int] = {}
    rollouts: Sequence[Row] = doc.get("rollouts") or []
    for row in sorted(rollouts, key=lambda r: bool(r.get("success"))):  # failures first
        video, task = row.get("video"), str(row.get("task") or row.get("key") or "task")
        if not video or not Path(video).is_file() or picked.get(task, 0) >= media:
            continue
        picked[task] = picked.get(task, 0) + 1
        verdict = "pass" if row.get("success") else "fail"
        out.media[f"hud/video/{_slug(task)}/{picked[task]}-{verdict}"] = Path(video)
    prov = doc.get("provenance") or {}
    agent = doc.get("agent")
    if agent is not None:
        out.config["hud.agent"] = str(agent)
    ckpt = prov.get("checkpoint")
    if isinstance(ckpt, Mapping) and ckpt.get("hash"):
        out.config["hud.checkpoint_hash"] = str(ckpt["hash"])
    image = prov.get("image")
    if isinstance(image, Mapping) and image.get("digest"):
        out.config["hud.image_digest"] = str(image["digest"])
    for key in ("runtime", "seed"):
        value = doc.get(key)
        if value is not None:
            out.config[f"hud.{key}"] = str(value)
    return out


def open_tracker(name: str, **options: object) -> Tracker:
    """The tracker ``name``, its library imported now (ImportError names the install)."""
    install = TRACKERS[name]  # a KeyError for a name that is no tracker: nothing imported
    try:
        module = importlib.import_module(f"{__package__}.{name}")
    except ImportError as exc:
        raise ImportError(f"--hud-log={name} needs its library ({exc}); fix: {install}") from exc
    tracker: Tracker = module.open_tracker(**options)
    return tracker


def log_figures(names: Sequence[str], figures: Figures, **options: object) -> list[str]:
    """Log ``figures`` to each tracker; returns the names that logged. A tracker that
    fails is one :class:`TrackerWarning` naming it and the cause."""
    done = []
    for name in names:
        try:
            tracker = open_tracker(name, **options)
            try:
                tracker.log(figures)
            finally:
                tracker.close()
        except Exception as exc:  # never fail an evaluation over its logging
            warnings.warn(
                f"--hud-log={name}: not logged ({type(exc).__name__}: {exc})",
                TrackerWarning,
                stacklevel=2,
            )
            continue
        done.append(name)
    return done
