"""LIBERO-PRO libero_spatial_lan rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.pro.libero_spatial_lan --hud-runtime=docker``.
"""
