"""LIBERO libero_10 rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.libero_10`` (the env served
from the LIBERO venv or image; see :mod:`pytest_hud.suites.libero`).
"""
