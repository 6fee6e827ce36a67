"""Other ecosystems' wires and envs (vla-eval, LeRobot), each in its own sub-package."""
