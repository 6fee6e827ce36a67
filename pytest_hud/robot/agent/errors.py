"""The agent registry's error, in a leaf module so the registry and the LeRobot factories
it names can both raise it without importing each other."""

from __future__ import annotations

__all__ = ["AgentSpecError"]


class AgentSpecError(LookupError):
    """An agent name that names nothing; the message lists the valid forms."""
