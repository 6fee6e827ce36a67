"""LIBERO-PRO: its lan, object, swap and task perturbations of libero_spatial, libero_object,
libero_goal and libero_10 (16 packages, 10 tasks x 50 fixed initial states each).

Run: ``pytest --pyargs pytest_hud.suites.libero.pro --hud-runtime=docker`` (all 8,000 rows) or
one package, e.g. ``pytest_hud.suites.libero.pro.libero_goal_swap``.
"""
