"""LIBERO-PRO libero_object_lan rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.pro.libero_object_lan --hud-runtime=docker``.
"""
