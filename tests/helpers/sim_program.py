"""A sim program of the user's own: run as a script, it serves a CounterSim."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from sims import CounterSim

from pytest_hud.robot import serve_bridge

if __name__ == "__main__":
    serve_bridge(CounterSim(num_envs=int(sys.argv[1]) if len(sys.argv) > 1 else 1))
