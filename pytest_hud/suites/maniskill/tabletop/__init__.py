"""ManiSkill3 tabletop rows: PickCube, PushCube, StackCube, PegInsertionSide x 50 seeds.

Run: ``pytest --pyargs pytest_hud.suites.maniskill.tabletop --hud-agent=maniskill-expert``.
"""
