"""gymnasium-robotics FrankaKitchen rows: the four-task goal and each of the seven tasks alone x
10 seeds.

Run: ``pytest --pyargs pytest_hud.suites.gymnasium_robotics.kitchen --hud-agent=random``.
"""
