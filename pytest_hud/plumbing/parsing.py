"""Parsing input that comes from outside (a file a user wrote, a frame a peer sent): whatever
the parser raises on garbage (a library raises a zoo of types) becomes the reader's own error,
naming what it was reading, so its callers catch one type.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["parse_errors_as"]


@contextlib.contextmanager
def parse_errors_as(error: type[Exception], what: str) -> Iterator[None]:
    """Inside, ``error`` itself passes; any other Exception becomes ``error("WHAT: MESSAGE")``
    (``what`` says what could not be parsed; the parser's traceback is dropped)."""
    try:
        yield
    except error:
        raise
    except Exception as exc:
        raise error(f"{what}: {exc}") from None
