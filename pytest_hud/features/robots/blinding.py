"""Blinding: the operator of a paired session sees each arm under a code ("arm K"), drawn
from the session's order seed, so a resumed session (same seed, kept in its ledger) shows
the same codes; the report names the agents behind the codes at the end."""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["CODES", "arm_codes"]

#: Letters that are no arm's own (arms are A, B, C, ...), easy to tell apart when read aloud.
CODES = "KMRTVXZHJPW"


def arm_codes(letters: Sequence[str], seed: int) -> dict[str, str]:
    """Each arm letter's code, a fixed shuffle of :data:`CODES` by ``seed``."""
    if len(letters) > len(CODES):
        raise ValueError(f"blinding codes {len(CODES)} arms at most, got {len(letters)}")
    pool = list(CODES)
    random.Random(f"pytest-hud blinding {seed}").shuffle(pool)
    return dict(zip(letters, pool, strict=False))
