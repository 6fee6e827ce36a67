"""The docker runtime: containers (:mod:`.container`), the engine, reaping (:mod:`.owners`),
registry-free images (:mod:`.image`, :mod:`.auto`) and its CLI (:mod:`.cli`).
"""

from typing import TYPE_CHECKING

from pytest_hud._lazy import exports

if TYPE_CHECKING:
    from pytest_hud.runtime.docker.auto import AutoDockerRuntime
    from pytest_hud.runtime.docker.container import DockerRuntime
    from pytest_hud.runtime.docker.engine import DEFAULT_BASE, require_engine
    from pytest_hud.runtime.docker.image import build_image, cache_dir
    from pytest_hud.runtime.docker.owners import reap_containers, session_id

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "DEFAULT_BASE",
    "AutoDockerRuntime",
    "DockerRuntime",
    "build_image",
    "cache_dir",
    "reap_containers",
    "require_engine",
    "session_id",
]
