"""``python -m pytest_hud.robot.policy_server``: the policy server CLI, kept at its documented
path (the server lives in :mod:`pytest_hud.robot.agent.policy_server`)."""

from pytest_hud.robot.agent.policy_server import main

if __name__ == "__main__":
    main()
