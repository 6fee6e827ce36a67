"""robosuite Door rows: 50 seeds, each placing the objects.

Run: ``pytest --pyargs pytest_hud.suites.robosuite.door --hud-agent=robosuite-expert``.
"""
