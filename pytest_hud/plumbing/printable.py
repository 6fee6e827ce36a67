"""Text from a row, a file or a peer, made safe to show on a terminal.

A terminal obeys the control characters in what it prints: ESC sequences set the window
title, clear the screen, hide text, move the cursor or write the clipboard (OSC 52), and
C1 controls, bidirectional overrides and line separators do their own mischief. Every
string pytest-hud shows on a terminal that it did not write itself (a task, a set-up
text, a row's args, a results file's labels, a lock file's text) goes through
:func:`printable` first, which shows each such character as a visible escape instead.
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable"]

#: Format characters that reorder or hide the text around them (Unicode's bidi controls and
#: the line and paragraph separators), on top of every control character (category Cc).
_REORDERING = frozenset("\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e") | frozenset(
    "\u2066\u2067\u2068\u2069"
)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, newlines: bool = False) -> str:
    """``text`` (any object: its ``str``) with every control character shown as an escape
    (ESC as ``\\x1b``, a C1 control as ``\\x9b``, a bidi override as ``\\u202e``); tabs and,
    with ``newlines``, line feeds are kept. Plain text comes back unchanged."""
    text = text if isinstance(text, str) else str(text)
    if text.isprintable():  # the common case, in C
        return text
    return "".join(
        char
        if (char == "\t" or (newlines and char == "\n"))
        or (unicodedata.category(char) != "Cc" and char not in _REORDERING)
        else _escape(char)
        for char in text
    )
