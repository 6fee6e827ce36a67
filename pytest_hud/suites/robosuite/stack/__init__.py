"""robosuite Stack rows: 50 seeds, each placing the objects.

Run: ``pytest --pyargs pytest_hud.suites.robosuite.stack --hud-agent=robosuite-expert``.
"""
