"""MetaWorld MT50 rows: 50 tasks x 2 train goals.

Run: ``pytest --pyargs pytest_hud.suites.metaworld.mt50``.
"""
