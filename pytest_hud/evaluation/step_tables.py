"""STEP decision tables in a cache this project controls (``$PYTEST_HUD_CACHE/step``): the library
would write synthesized tables into site-packages, which fails read-only.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import sys
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

from pytest_hud.errors import HudError

__all__ = ["StepTableError", "cache_dir", "load_table", "main"]

#: shape priors the library's synthesis script picks per n_max (its __main__ block);
#: other n_max use the script's defaults (2.1, 1.4)
_SHAPE = {100: (2.1, 1.4), 200: (2.1, 1.15), 300: (2.1, 1.4), 400: (2.1, 1.4), 500: (2.2, 1.35)}
_N_POINTS = 129


class StepTableError(HudError, RuntimeError):
    """A STEP table could be neither found nor synthesized."""


def cache_dir() -> Path:
    """Where synthesized tables live: ``$PYTEST_HUD_CACHE/step`` or the user cache."""
    root = os.environ.get("PYTEST_HUD_CACHE")
    if root:
        return Path(root) / "step"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pytest-hud" / "step"


def _shipped(n_max: int, alpha: float) -> Path | None:
    try:
        import sequentialized_barnard_tests as sbt
    except ImportError as exc:
        raise StepTableError(
            "the baseline gate needs sequentialized-barnard-tests; got ImportError "
            f"({exc}); fix: pip install 'pytest-hud[stats]'"
        ) from None
    folder = f"n_max_{n_max}_alpha_{alpha}_shape_parameter_0.0_pnorm_False"
    path = Path(sbt.__file__).parent / "policies" / folder / "policy_compressed.pkl"
    return path if path.is_file() else None


def _synthesize(n_max: int, alpha: float) -> list[object]:
    from sequentialized_barnard_tests.scripts import synthesize_general_step_policy as synth

    lam, axis = _SHAPE.get(n_max, (2.1, 1.4))
    # the synthesis draws a tqdm bar on stderr; a gate must not
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        table, _, _ = synth.run_step_policy_synthesis(n_max, alpha, _N_POINTS, lam, axis)
    return list(table)


def _store(path: Path, table: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(table, f)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old or the new file
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@lru_cache(maxsize=16)
def _cached(n_max: int, alpha: float, folder: str) -> tuple[object, ...]:
    shipped = _shipped(n_max, alpha)
    if shipped is not None:
        with shipped.open("rb") as f:
            return tuple(pickle.load(f))
    path = Path(folder) / f"step_nmax{n_max}_alpha{alpha}.pkl"
    if path.is_file():
        with path.open("rb") as f:
            return tuple(pickle.load(f))
    try:
        table = _synthesize(n_max, alpha)
    except Exception as exc:
        raise StepTableError(
            f"STEP table for n_max={n_max}, alpha={alpha}: expected a synthesized table, "
            f"got {type(exc).__name__}: {exc}; fix: use n_max 200 or 500 at alpha 0.05 "
            "(shipped tables) or precompute with python -m pytest_hud.evaluation.step_tables"
        ) from exc
    if len(table) != n_max + 1:
        raise StepTableError(
            f"STEP table for n_max={n_max}: expected {n_max + 1} time slices, got {len(table)}"
        )
    try:
        _store(path, table)
    except OSError as exc:  # still usable from memory; only the next process pays again
        warnings.warn(
            f"STEP table not cached at {path} ({exc}); set PYTEST_HUD_CACHE to a writable "
            "folder to keep it",
            stacklevel=3,
        )
    return tuple(table)


def load_table(n_max: int, alpha: float, folder: Path | None = None) -> list[object]:
    """The STEP decision table for ``(n_max, alpha)``: shipped, cached or synthesized."""
    return list(_cached(int(n_max), float(alpha), str(folder or cache_dir())))


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_hud.evaluation.step_tables N_MAX [ALPHA]``: precompute a table
    (for images with a read-only home or site-packages)."""
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print("usage: python -m pytest_hud.evaluation.step_tables N_MAX [ALPHA]", file=sys.stderr)
        return 2
    n_max, alpha = int(args[0]), float(args[1]) if len(args) > 1 else 0.05
    load_table(n_max, alpha)
    print(f"STEP table n_max={n_max} alpha={alpha}: ready in {cache_dir()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
