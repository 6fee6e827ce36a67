"""What an image or venv serving the Kinetix modules needs, and the switch for pixel
observations: read by the env module (:mod:`pytest_hud.suites.kinetix`) and vla-eval's class
(:mod:`.vla_eval`) alike, each of which names them for the image builder.
"""

from __future__ import annotations

__all__ = ["APT", "PIXELS_VAR", "REQUIRES"]

#: Python requirements of an image or venv serving this module: kinetix-env (JAX on the
#: CPU; its levels ship in the package), and vla-eval, whose Kinetix benchmark class
#: (:mod:`.vla_eval`) serves the same levels from the same image.
REQUIRES = ["kinetix-env==3.0.2", "vla-eval==0.8.0"]
#: Kinetix renders in JAX (no GL): no Debian packages.
APT: list[str] = []

#: set (not 0): observations carry the rendered frame as well as the state
PIXELS_VAR = "PYTEST_HUD_KINETIX_PIXELS"
