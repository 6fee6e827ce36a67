"""Benchmark suites shipped with pytest-hud: :mod:`.metaworld` and :mod:`.libero`, each an env
module with its rows and image requirements (docs/guides/suites.md).
"""
