"""The docker runtime: a container per acquisition (:mod:`.container`), the engine it
talks to (:mod:`.engine`), ownership and reaping (:mod:`.owners`), images built without a
registry (:mod:`.image`, :mod:`.apt`), auto-built from the env modules' declarations
(:mod:`.auto`, :mod:`.groups`), and ``python -m pytest_hud image`` (:mod:`.cli`)."""

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
