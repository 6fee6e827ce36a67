"""Kinetix's medium hand-made levels: 24 levels, seed 0.

Run: ``pytest --pyargs pytest_hud.suites.kinetix.m --hud-agent=kinetix-expert``.
"""
