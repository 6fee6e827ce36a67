"""LIBERO-PRO libero_spatial_task rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.pro.libero_spatial_task --hud-runtime=docker``.
"""
