"""The docker runtime: containers (:mod:`.container`), the engine, reaping (:mod:`.owners`),
registry-free images (:mod:`.base`, :mod:`.image`, :mod:`.auto`) and its CLI (:mod:`.cli`).
"""

from typing import TYPE_CHECKING

from pytest_hud.plumbing.lazy import exports

if TYPE_CHECKING:
    from pytest_hud.runtime.docker.auto import AutoDockerRuntime
    from pytest_hud.runtime.docker.base import build_host_base, ensure_base
    from pytest_hud.runtime.docker.container import DockerRuntime
    from pytest_hud.runtime.docker.engine import require_engine
    from pytest_hud.runtime.docker.image import build_image, cache_dir
    from pytest_hud.runtime.docker.owners import reap_containers, session_id

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "AutoDockerRuntime",
    "DockerRuntime",
    "build_host_base",
    "build_image",
    "cache_dir",
    "ensure_base",
    "reap_containers",
    "require_engine",
    "session_id",
]
