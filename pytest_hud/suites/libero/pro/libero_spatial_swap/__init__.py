"""LIBERO-PRO libero_spatial_swap rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.pro.libero_spatial_swap --hud-runtime=docker``.
"""
