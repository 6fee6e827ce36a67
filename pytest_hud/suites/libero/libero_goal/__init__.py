"""LIBERO libero_goal rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.libero_goal --hud-runtime=docker`` (the
env served from its own image; see :mod:`pytest_hud.suites.libero`).
"""
