"""LeRobot interop: :mod:`.envs` (LeRobot env configs as sims), :mod:`.aloha`, :mod:`.reference`.
The version seam every LeRobot call goes through is :mod:`pytest_hud.robot.lerobot_version`
(the agent side and the recorder use it too, so it lives below interop).
"""
