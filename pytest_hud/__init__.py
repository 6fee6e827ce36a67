"""pytest-hud: policy evaluation as pytest tests."""

__version__ = "0.1.0"
