"""Traceback text without ``ast.parse``, for threads other than pytest's: CPython 3.11's AST
constructor is not thread-safe, and ``traceback`` parses to place carets.
"""

from __future__ import annotations

import sys
import traceback

__all__ = ["format_exc", "format_exception"]

_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def format_exc() -> str:
    """``traceback.format_exc()`` without ``ast.parse`` (the exception being handled)."""
    exc = sys.exc_info()[1]
    return format_exception(exc) if exc is not None else "NoneType: None\n"


def format_exception(exc: BaseException) -> str:
    """``"".join(traceback.format_exception(exc))`` without ``ast.parse``: causes and
    contexts first, as Python prints them."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    parts: list[str] = []
    for item, follows in reversed(chain):
        parts.append(_one(item))
        parts.append(follows)
    return "".join(parts)


def _one(exc: BaseException) -> str:
    lines: list[str] = []
    if exc.__traceback__ is not None:
        lines.append("Traceback (most recent call last):\n")
        for frame in traceback.extract_tb(exc.__traceback__):
            lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n')
            if frame.line:
                lines.append(f"    {frame.line.strip()}\n")
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return "".join(lines)
