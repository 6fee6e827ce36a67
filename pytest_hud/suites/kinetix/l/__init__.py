"""Kinetix's large hand-made levels: 40 levels, seed 0.

Run: ``pytest --pyargs pytest_hud.suites.kinetix.l --hud-agent=kinetix-expert``.
"""
