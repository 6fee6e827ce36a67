"""The docker entry of the backends table (runtime/backends.py): its provider, the check
before any item (an engine that answers; the base its images build FROM) and the sweep of
containers whose owner died."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_hud.runtime.backends import BackendParts

if TYPE_CHECKING:
    from pytest_hud.runtime.backends import RuntimeSpec
    from pytest_hud.runtime.provider import Provider

__all__ = ["PARTS", "image_digest", "preflight", "provider", "reap"]


def provider(spec: RuntimeSpec) -> Provider:
    """``docker:IMAGE``: that image; ``docker``: one built from the declaring modules."""
    if spec.arg:
        from pytest_hud.runtime.docker.container import DockerRuntime

        return DockerRuntime(spec.arg, forward_env=True)  # as the auto-built form does
    from pytest_hud.runtime.docker.auto import AutoDockerRuntime
    from pytest_hud.runtime.routing import by_declaration, undeclared

    return by_declaration(AutoDockerRuntime(base=spec.base).serving, undeclared)


def preflight(spec: RuntimeSpec, say: Callable[[str], None]) -> None:
    """Raise SubstrateError (or ImportError: no docker SDK) for an engine that does not
    answer; for images built here, make sure of their base (pulled or built once, with
    progress through ``say``) under the build lock, so the workers find it."""
    from pytest_hud.runtime.docker.base import ensure_base
    from pytest_hud.runtime.docker.engine import _client, require_engine
    from pytest_hud.runtime.docker.image import build_lock

    require_engine()
    if not spec.arg:
        with build_lock():
            ensure_base(_client(), spec.base, say=say)


def reap() -> None:
    """Remove the containers whose owner died without removing them (a worker that crashed
    or was killed with an interrupted controller), and settle the creates a killed worker
    left in flight; live owners' are left alone."""
    from pytest_hud.runtime.docker.intents import settle_intents
    from pytest_hud.runtime.docker.owners import reap_containers

    reap_containers()
    settle_intents()


def image_digest(image: str) -> str | None:
    """The image's repo digest (``name@sha256:...``) or, for a local-only build, its id;
    None without the docker SDK, an engine, or the image (for the run's provenance)."""
    from pytest_hud.runtime.docker.engine import image_digest as digest

    return digest(image)


PARTS = BackendParts(provider=provider, preflight=preflight, reap=reap, image_digest=image_digest)
