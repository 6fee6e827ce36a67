"""The root of every error pytest-hud raises: ``except pytest_hud.HudError`` catches them.

Each error is defined in its layer (``robot/wire/errors.py``, ``robot/sim/errors.py``,
``robot/agent/errors.py``, ``robot/record/errors.py``, ``runtime/errors.py``,
``_plugin/errors.py``; ``ContractError``, ``ChildError`` and the RPC errors beside their
modules) and also keeps the builtin base it always had (``ValueError``,
``LookupError``, ``ConnectionError``, ...), so existing ``except`` clauses still match.
"""

from __future__ import annotations

__all__ = ["HudError"]


class HudError(Exception):
    """Anything pytest-hud raises on purpose (the message says expected / got / fix)."""
