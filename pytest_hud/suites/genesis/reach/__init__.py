"""lerobot-genesis's FrankaReach-v0 x 10 seeds (LeRobot 0.6, Python 3.12: the genesis extra).

Run: ``pytest --pyargs pytest_hud.suites.genesis.reach --hud-agent=genesis-expert``.
"""
