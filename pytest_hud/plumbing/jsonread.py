"""JSON read from a file, with a bound on its nesting: the one parser every reader of a file
a session did not write uses (ledgers, results, task files, contracts).

``json.loads`` recurses once per level: ``"[" * 100000`` raised RecursionError, which no
reader caught (``--hud-resume`` ended in INTERNALERROR, ``compare`` in a traceback and exit
1, the code of a real drop). Here a document nested deeper than :data:`MAX_DEPTH` is a
:class:`TooDeep`, a ``json.JSONDecodeError``, so every reader's clause for a file that is
not JSON reports it as one (exit 4 for the plugin and ``compare``).
"""

from __future__ import annotations

import json

from pytest_hud.errors import HudError
from pytest_hud.plumbing.jsonvalue import JSONValue

__all__ = ["MAX_DEPTH", "TooDeep", "depth_over", "loads"]

#: The deepest nesting of arrays and objects read from a file (pytest-hud's own nest 3 to 6).
MAX_DEPTH = 64


class TooDeep(HudError, json.JSONDecodeError):
    """A document nested deeper than :data:`MAX_DEPTH`."""


def depth_over(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and dicts more than ``limit`` deep; a walk
    one level at a time, with no recursion."""
    frontier = [value]
    for _ in range(limit):  # after k rounds the frontier is level k + 1
        below: list[object] = []
        for item in frontier:
            if type(item) is dict:
                below += [v for v in item.values() if type(v) is dict or type(v) is list]
            elif type(item) is list:
                below += [v for v in item if type(v) is dict or type(v) is list]
        if not below:
            return False
        frontier = below
    return True


def loads(text: str | bytes | bytearray) -> JSONValue:
    """``json.loads(text)``, or :class:`TooDeep` for a document nested deeper than
    :data:`MAX_DEPTH` (however deep: the parser's own recursion limit is caught too)."""
    if isinstance(text, str):
        opened = text.count("[") + text.count("{")
    else:
        opened = text.count(b"[") + text.count(b"{")
    shallow = opened <= MAX_DEPTH  # cannot be deeper: counted in C
    try:
        value: JSONValue = json.loads(text)
    except RecursionError:
        pass
    else:
        if shallow or not depth_over(value):
            return value
    doc = text if isinstance(text, str) else bytes(text[:80]).decode("latin-1")
    raise TooDeep(
        f"nested more than {MAX_DEPTH} arrays or objects deep; the files pytest-hud writes "
        "nest a few levels, so this one was made or edited by something else",
        doc[:80],
        0,
    )
