"""JSON read from a file, with a bound on its nesting: the one parser every reader of a file
a session did not write uses (ledgers, results, task files, contracts).

``json.loads`` recurses once per level: ``"[" * 100000`` raised RecursionError, which no
reader caught (``--hud-resume`` ended in INTERNALERROR, ``compare`` in a traceback and exit
1, the code of a real drop). Here a document nested deeper than :data:`MAX_DEPTH` is a
:class:`TooDeep`, a ``json.JSONDecodeError``, so every reader's clause for a file that is
not JSON reports it as one (exit 4 for the plugin and ``compare``). Its depth is read from
the text before the parser runs: a parser left to recurse to the interpreter's limit made
any finalizer the collector ran at that depth fail (the web console, fed ``"[" * 30000`` by
a page, once failed its test so).
"""

from __future__ import annotations

import json
import re

from pytest_hud.errors import HudError
from pytest_hud.plumbing.jsonvalue import JSONValue

__all__ = ["MAX_DEPTH", "TooDeep", "depth_over", "loads"]

#: The deepest nesting of arrays and objects read from a file (pytest-hud's own nest 3 to 6).
MAX_DEPTH = 64


class TooDeep(HudError, json.JSONDecodeError):
    """A document nested deeper than :data:`MAX_DEPTH`."""


#: a JSON string (skipped whole, so brackets inside it do not count) or one bracket
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
_BYTE_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def depth_over(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text ``text`` opens arrays and objects more than ``limit`` deep: one
    pass over its brackets outside strings (a regular expression), no parse, no recursion."""
    tokens = _TOKENS.finditer(text) if isinstance(text, str) else _BYTE_TOKENS.finditer(text)
    depth = 0
    for token in tokens:
        first = token.group()[:1]
        if first in ("[", "{", b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif first in ("]", "}", b"]", b"}"):
            depth -= 1
    return False


def loads(text: str | bytes | bytearray) -> JSONValue:
    """``json.loads(text)``, or :class:`TooDeep` for a document nested deeper than
    :data:`MAX_DEPTH`, found before the parser runs."""
    if isinstance(text, str):
        opened = text.count("[") + text.count("{")
    else:
        text = bytes(text)
        opened = text.count(b"[") + text.count(b"{")
    if opened <= MAX_DEPTH or not depth_over(text):  # the count: cannot be deeper, in C
        value: JSONValue = json.loads(text)
        return value
    doc = text if isinstance(text, str) else text[:80].decode("latin-1")
    raise TooDeep(
        f"nested more than {MAX_DEPTH} arrays or objects deep; the files pytest-hud writes "
        "nest a few levels, so this one was made or edited by something else",
        doc[:80],
        0,
    )
