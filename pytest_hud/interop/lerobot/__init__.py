"""LeRobot interop: :mod:`.compat` (the one place code differs by LeRobot version) and
:mod:`.envs` (any LeRobot ``EnvConfig`` served through LeRobot's own ``make_env``).

Nothing is imported here, so the agent side (``robot/``) can use :mod:`.compat` without
pulling the env side in."""
