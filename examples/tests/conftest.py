"""The example suite's env modules: importing them declares the envs its rows name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import envs.pendulum  # noqa: F401  (declares the pendulum and cartpole envs)
import envs.pusht  # noqa: F401
