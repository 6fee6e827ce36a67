"""``python -m pytest_hud.robot.sim``: the sim program (see :mod:`.program`)."""

from pytest_hud.robot.sim.program import main

if __name__ == "__main__":
    main()
