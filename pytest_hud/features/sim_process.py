"""``--hud-sim-process``: every ``env.gym`` / ``env.vla_eval`` sim whose env module left its
placement open gets a process of its own, as before sims were served in the env server's
process by default. For a sim that may crash or hang: a sim process's crash is an ERROR
naming it and a stuck step is cut off by its call timeout, where an inline sim in the local
runtime shares the pytest process (the cost: a second process and round trip each step).
"""

from __future__ import annotations

from pytest_hud._plugin.feature_api import FeatureSettings, Hud, option
from pytest_hud.plumbing.process import set_env
from pytest_hud.robot.sim.endpoint import SIM_PROCESS_ENV

__all__ = ["Settings", "enable"]


class Settings(FeatureSettings):
    sim_process: bool = option(
        "--hud-sim-process",
        "serve each env.gym / env.vla_eval sim in a process of its own instead of the env "
        "server's (isolation for a sim that may crash or hang; costs a round trip a step); "
        "an env module's inline=True or inline=False still wins",
        default=False,
        kind="flag",
    )


def enable(settings: Settings, hud: Hud) -> None:
    """Export the choice to the env modules loaded from here on (and their servers)."""
    if settings.sim_process:
        hud.config.add_cleanup(set_env(SIM_PROCESS_ENV, "1"))
