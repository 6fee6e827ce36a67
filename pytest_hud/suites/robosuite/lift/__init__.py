"""robosuite Lift rows: 50 seeds, each placing the objects.

Run: ``pytest --pyargs pytest_hud.suites.robosuite.lift --hud-agent=robosuite-expert``.
"""
