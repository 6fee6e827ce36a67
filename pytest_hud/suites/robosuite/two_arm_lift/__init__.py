"""robosuite TwoArmLift rows: 50 seeds, each placing the objects.

Run: ``pytest --pyargs pytest_hud.suites.robosuite.two_arm_lift --hud-agent=robosuite-expert``.
"""
