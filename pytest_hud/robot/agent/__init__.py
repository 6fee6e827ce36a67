"""The agent side of the robot capability: RobotAgent, Model/Adapter/Ensembler, batching,
the agent registry, LeRobot and remote models, the policy server. Never imports robot.sim."""
