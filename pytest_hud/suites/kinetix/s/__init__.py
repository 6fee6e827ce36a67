"""Kinetix's small hand-made levels: 10 levels, seed 0.

Run: ``pytest --pyargs pytest_hud.suites.kinetix.s --hud-agent=kinetix-expert``.
"""
