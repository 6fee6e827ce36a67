"""The pieces behind the pytest plugin (hooks live in ``pytest_hud.plugin``): the core
session (``session``) composing collection (``collect``), rollouts (``evaluator``) and
reporting (``reporting``), and the optional features as plugins (``features/``) that
reach it through :mod:`pytest_hud.hookspecs`."""
