"""LIBERO-PRO libero_goal_swap rows: 10 tasks x 50 fixed initial states.

Run: ``pytest --pyargs pytest_hud.suites.libero.pro.libero_goal_swap --hud-runtime=docker``.
"""
