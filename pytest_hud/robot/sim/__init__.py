"""The env side of the robot capability: RobotBridge, GymBridge, RobotEndpoint and the sim
program a sim process runs. Never imports robot.agent."""
