"""The pieces behind the pytest plugin (hooks live in ``pytest_hud.plugin``)."""
