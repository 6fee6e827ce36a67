"""The pieces behind the pytest plugin (hooks live in :mod:`pytest_hud.plugin`): the core session
and the optional features that reach it through hooks.
"""
