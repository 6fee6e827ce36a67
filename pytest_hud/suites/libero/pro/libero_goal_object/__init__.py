"""LIBERO-PRO libero_goal_object rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.pro.libero_goal_object --hud-runtime=docker``.
"""
