"""MetaWorld MT10 rows: 10 tasks x 5 train goals.

Run: ``pytest --pyargs pytest_hud.suites.metaworld.mt10``.
"""
