"""Other ecosystems' envs and wires, served through pytest-hud (LeRobot's envs and its
version seam: :mod:`.lerobot`). Importing this package imports nothing heavy."""
