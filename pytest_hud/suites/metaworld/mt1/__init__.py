"""MetaWorld MT1 rows: reach-v3 x its 50 train goals.

Run: ``pytest --pyargs pytest_hud.suites.metaworld.mt1``.
"""
