"""LIBERO libero_90 rows: 90 tasks x 10 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.libero_90 --hud-runtime=docker`` (the
env served from its own image; see :mod:`pytest_hud.suites.libero`).
"""
