"""gymnasium-robotics Fetch rows: Reach, Push and PickAndPlace x 50 seeds.

Run: ``pytest --pyargs pytest_hud.suites.gymnasium_robotics.fetch --hud-agent=fetch-expert``.
"""
