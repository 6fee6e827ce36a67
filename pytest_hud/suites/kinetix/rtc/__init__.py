"""vla-eval's Kinetix benchmark (the RTC tasks kinetix-env ships: 8 of 12), one episode each.

Run: ``pytest --pyargs pytest_hud.suites.kinetix.rtc`` (its env module: ``.vla_eval``).
"""
