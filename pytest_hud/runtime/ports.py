"""Loopback ports handed to a child to bind (an ssh forward, a Ray head), and telling from the
child's output that one was taken: a port found free is free only until it is bound, and on
a busy machine another process can take it in between, so callers retry on fresh ports.
"""

from __future__ import annotations

import socket

__all__ = ["free_port", "port_taken"]


def free_port() -> int:
    """A loopback port no socket was bound to a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_taken(output: str) -> bool:
    """Whether a child's output says it could not bind a port it was given: ssh's and
    Python's ``Address already in use``, Ray's ``Failed to start the grpc server``."""
    text = output.lower()
    return "already in use" in text or "failed to start the grpc server" in text
