"""gym-hil PandaPickCube rows: 50 seeds, each placing the cube.

Run: ``pytest --pyargs pytest_hud.suites.gym_hil.pick_cube --hud-agent=gym-hil-expert``.
"""
