"""Genesis as a shipped suite, reached through LeRobot: lerobot-genesis (a third-party LeRobot env
plugin) registers the ``genesis`` env type, and the env module serves it with
``env.lerobot("genesis", task=...)``: LeRobot's own ``make_env`` and env processors build it,
as lerobot-eval does (guide: docs/guides/suites.md).

Its one reference task, ``FrankaReach-v0``: a Franka Panda (Genesis's bundled MJCF, no
download) drives its 9 joints to a goal pose; success when every joint is within 0.15 rad of
it. Observations (through LeRobot's processors): ``observation/image`` (240 x 320 camera) and
``observation/state`` (9 joint positions); action: 9 normalised joint targets in [-1, 1].
Genesis compiles its kernels on the CPU at first use (minutes; cached on disk after).
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator

from pytest_hud import Environment, Task
from pytest_hud.suites.genesis.expert import GenesisReachExpert, expert_agent
from pytest_hud.suites.tables import shipped_files

__all__ = [
    "APT",
    "ENV",
    "MAX_STEPS",
    "MODULE",
    "PROMPT",
    "REQUIRES",
    "SUITE_FILES",
    "GenesisReachExpert",
    "env",
    "expert_agent",
    "rows",
]

ENV = "genesis"
MODULE = "pytest_hud.suites.genesis"
#: lerobot-genesis's episode length for the reference task.
MAX_STEPS = 300
#: lerobot-genesis's task text for it.
PROMPT = "reach the franka target pose"
#: Python requirements of a venv or image serving this module: LeRobot >= 0.5 (Python 3.12;
#: CI's second stack), Genesis and the plugin.
REQUIRES = ["lerobot>=0.5,<0.7", "genesis-world==1.4.5", "lerobot-genesis==0.3.1"]
#: Debian packages: Genesis's rasterizer renders through EGL or OSMesa (Mesa).
APT = ["libegl1", "libegl-mesa0", "libgl1-mesa-dri", "libgbm1", "libosmesa6", "libgl1"]
#: Episode length override (a short smoke episode); LeRobot's config caps it.
STEPS_VAR = "PYTEST_HUD_GENESIS_STEPS"

env = Environment(ENV, requires=REQUIRES, apt=APT)
sim = env.lerobot(
    "genesis",
    task="FrankaReach-v0",
    episode_length=int(os.environ.get(STEPS_VAR) or MAX_STEPS),
    prompt=PROMPT,
    start_timeout=1800.0,  # a cold kernel cache: Genesis compiles for minutes on a CPU
    # in the env server's process unless the session asks for sim processes: Genesis
    # initialises once a process and reuses its compiled kernels for every later scene
    inline=None,
)


@env.template()
async def franka_reach(seed: int = 0) -> AsyncGenerator[object, None]:
    """lerobot-genesis's FrankaReach-v0 (success: LeRobot's ``is_success``)."""
    ep = await sim.reset(seed=seed)
    yield {"prompt": PROMPT, "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])


def rows(seeds: int = 10) -> list[Task]:
    """FrankaReach x ``seeds`` (its reset is deterministic: the seed reaches the env only)."""
    return [franka_reach.task(seed=k) for k in range(seeds)]


#: The shipped JSONL file, name -> (path, rows) (suites/files.py writes it).
SUITE_FILES = shipped_files(__file__, {"reach": rows})  # not the template's name: a
# package of that name, once imported, would stand where the template stood
