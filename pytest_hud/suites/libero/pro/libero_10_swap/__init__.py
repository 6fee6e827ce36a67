"""LIBERO-PRO libero_10_swap rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.pro.libero_10_swap --hud-runtime=docker``.
"""
