"""A training run's checkpoints: where they are, their step, and when one is complete (whole
files, and past lerobot-train's ``last`` link or unchanged between polls).
"""

from __future__ import annotations

import glob
import json
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_PATTERN",
    "DEFAULT_REQUIRE",
    "Checkpoint",
    "Pattern",
    "Readiness",
    "content_problems",
    "final_step",
    "lerobot_last_step",
]

#: lerobot-train's layout: OUTPUT_DIR/checkpoints/NNNNNN/pretrained_model
DEFAULT_PATTERN = "checkpoints/{step}/pretrained_model"
#: what lerobot-train's save_checkpoint puts in pretrained_model before the processors
DEFAULT_REQUIRE = ("config.json", "model.safetensors", "train_config.json")


@dataclass(frozen=True, order=True)
class Checkpoint:
    step: int
    path: Path


class Pattern:
    """A folder pattern relative to the run folder: glob syntax plus one ``{step}`` (digits)."""

    def __init__(self, text: str) -> None:
        if text.count("{step}") != 1:
            raise ValueError(
                f"--pattern: expected exactly one {{step}} in the folder pattern (e.g. "
                f"{DEFAULT_PATTERN!r}); got {text!r}"
            )
        self.text = text.strip("/")
        self.glob = self.text.replace("{step}", "*")
        parts = [_glob_regex(p) for p in self.text.split("{step}")]
        self._regex = re.compile(r"(\d+)".join(parts) + r"\Z")

    def step_of(self, relative: str) -> int | None:
        found = self._regex.match(relative.replace(os.sep, "/"))
        return int(found.group(1)) if found else None

    def scan(self, run: Path) -> dict[int, Path]:
        """Every folder matching the pattern under ``run``, by step (one per step)."""
        found: dict[int, Path] = {}
        if not run.is_dir():
            return found
        for hit in sorted(glob.glob(self.glob, root_dir=run)):
            step = self.step_of(hit)
            path = run / hit
            if step is not None and path.is_dir() and not (run / hit).is_symlink():
                found.setdefault(step, path)
        return found


def _glob_regex(part: str) -> str:
    """A glob fragment as a regex that never crosses a ``/``."""
    out = []
    for ch in part:
        if ch == "*":
            out.append(r"[^/]*")
        elif ch == "?":
            out.append(r"[^/]")
        else:
            out.append(re.escape(ch))
    return "".join(out)


def _safetensors_problem(path: Path) -> str | None:
    """Why a ``.safetensors`` file is not whole yet, or None: its size must be 8 + the
    header's length + the end of its last tensor's data."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{path.name}: {size} bytes, shorter than its header"
            (length,) = struct.unpack("<Q", head)
            if length > size - 8:
                return f"{path.name}: header of {length} bytes, file of {size}"
            header = json.loads(f.read(length))
    except (OSError, ValueError) as exc:
        return f"{path.name}: unreadable header ({exc})"
    ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    expected = 8 + length + max(ends, default=0)
    if size != expected:
        return f"{path.name}: {size} of {expected} bytes written"
    return None


def _state_files(doc: object) -> Iterator[str]:
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "state_file" and isinstance(value, str):
                yield value
            else:
                yield from _state_files(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from _state_files(value)


def content_problems(folder: Path, require: tuple[str, ...] = DEFAULT_REQUIRE) -> list[str]:
    """Why ``folder``'s content is not whole (empty when it is)."""
    problems = [f"{name} missing" for name in require if not (folder / name).is_file()]
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    if not files:
        return [*problems, "no files yet"]
    for path in files:
        if path.suffix == ".safetensors":
            if (problem := _safetensors_problem(path)) is not None:
                problems.append(problem)
        elif path.suffix == ".json":
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                problems.append(f"{path.name}: not whole JSON yet ({exc})")
                continue
            named = [n for n in _state_files(doc) if not (path.parent / n).is_file()]
            problems += [f"{n} missing (named by {path.name})" for n in named]
    return problems


def _listing(folder: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in sorted(folder.rglob("*")):
        try:
            st = path.stat()
        except OSError:  # removed between the listing and the stat: not settled
            return (("?", -1, -1),)
        out.append((str(path.relative_to(folder)), st.st_size, st.st_mtime_ns))
    return tuple(out)


def lerobot_last_step(run: Path) -> int | None:
    """The step lerobot-train's ``checkpoints/last`` link points at (None without one)."""
    link = run / "checkpoints" / "last"
    if not link.is_symlink():
        return None
    target = os.readlink(link)
    name = Path(target).name
    return int(name) if name.isdigit() else None


class Readiness:
    """Decides, poll after poll, which checkpoints are complete (see the module's rule)."""

    def __init__(self, run: Path, require: tuple[str, ...] = DEFAULT_REQUIRE) -> None:
        self.run = run
        self.require = require
        self._listings: dict[Path, tuple[tuple[str, int, int], ...]] = {}

    def check(self, ckpt: Checkpoint, last: int | None) -> str | None:
        """None when ``ckpt`` is complete, else why not (for the log)."""
        problems = content_problems(ckpt.path, self.require)
        if problems:
            self._listings.pop(ckpt.path, None)
            return "; ".join(problems[:3])
        if last is not None and _under_lerobot_marker(self.run, ckpt.path):
            if ckpt.step <= last:
                return None
            return f"lerobot-train has not marked it saved yet (checkpoints/last is {last})"
        listing = _listing(ckpt.path)
        before = self._listings.get(ckpt.path)
        self._listings[ckpt.path] = listing
        if before == listing:
            return None
        return "waiting for its files to stay unchanged for one poll"


def _under_lerobot_marker(run: Path, path: Path) -> bool:
    try:
        return path.relative_to(run / "checkpoints").parts[0].isdigit()
    except ValueError:
        return False


def final_step(ckpt: Path) -> int | None:
    """The run's last step from lerobot-train's ``train_config.json`` (``steps``), whose
    checkpoint lerobot-train always saves; None when the checkpoint has no such file."""
    try:
        steps = json.loads((ckpt / "train_config.json").read_text()).get("steps")
    except (OSError, ValueError, AttributeError):
        return None
    return int(steps) if isinstance(steps, int) and steps > 0 else None
