"""The ``python -m pytest_hud`` commands whose work lives in a lower layer: each module parses
its arguments, calls the computation and prints (``pytest_hud/__main__.py`` lists them).
"""
