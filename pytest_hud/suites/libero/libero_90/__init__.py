"""LIBERO libero_90 rows: 90 tasks x 10 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.libero_90`` (the env served
from the LIBERO venv or image; see :mod:`pytest_hud.suites.libero`).
"""
