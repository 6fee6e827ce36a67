"""LeRobot interop: :mod:`.compat` (the version seam) and :mod:`.envs` (LeRobot env configs as
sims). Imports nothing, so the agent side can use :mod:`.compat` alone.
"""
