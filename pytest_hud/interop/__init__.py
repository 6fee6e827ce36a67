"""Other ecosystems' wires and envs, served through pytest-hud, each in its own sub-package:
LeRobot's envs and its version seam (:mod:`.lerobot`), vla-eval's model servers and
benchmarks (:mod:`.vla_eval`). Importing this package imports nothing heavy."""
