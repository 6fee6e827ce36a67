"""pytest hooks for pytest-hud (options, markers, collection, reporting)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hud(tasks, min_success): evaluate a policy on task rows")
