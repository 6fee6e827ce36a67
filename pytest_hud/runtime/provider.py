"""The placement contract: a Provider is ``(task) -> async context manager yielding a Runtime``
(entering provisions, exiting tears down); a Runtime is a substrate's address.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pytest_hud.plumbing.auth import strip_token, url_token
from pytest_hud.runtime.task import RuntimeConfig, Task

__all__ = ["Provider", "Runtime"]


@dataclass(frozen=True)
class Runtime:
    """Where a substrate's control channel listens: ``tcp://host:port`` plus params.

    ``params`` may carry ``host`` and ``port_map`` (``{"8001": 49153}``): how urls the
    substrate publishes (its robot sims) are reached from this side; ``token``: the secret
    its server wants, when it is not this session's (a server started by hand).
    """

    url: str
    params: Mapping[str, Any] = field(default_factory=dict)
    config: RuntimeConfig | None = None

    def __post_init__(self) -> None:
        """A url's ``?token=`` (``python -m pytest_hud.serve`` prints one) moves into
        ``params["token"]``: the url is an address, shown in messages and reports; the
        token is a secret, never shown."""
        token = url_token(self.url)
        if token is not None:
            object.__setattr__(self, "url", strip_token(self.url))
            object.__setattr__(self, "params", {**self.params, "token": token})

    def __call__(self, task: Task, /) -> AbstractAsyncContextManager[Runtime]:
        return contextlib.nullcontext(self)

    def __hash__(self) -> int:
        return hash((self.url, self.config))


@runtime_checkable
class Provider(Protocol):
    """Anything callable as ``provider(task)`` returning an async context manager of Runtime."""

    def __call__(self, task: Task, /) -> AbstractAsyncContextManager[Runtime]: ...
