"""LIBERO libero_object rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.libero_object --hud-runtime=docker`` (the
env served from its own image; see :mod:`pytest_hud.suites.libero`).
"""
