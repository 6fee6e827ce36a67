"""The example suite's env modules: importing them declares the envs its rows name."""

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

for module in ("envs.pendulum", "envs.pusht"):  # pendulum + cartpole, and pusht
    importlib.import_module(module)
