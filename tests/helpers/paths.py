"""Where things are, for the project's tests (tests/helpers is on sys.path: pyproject's
``pythonpath``)."""

from pathlib import Path

HELPERS = Path(__file__).resolve().parent
TESTS = HELPERS.parent
ROOT = TESTS.parent
ENVS = HELPERS / "envs"
DATA = HELPERS / "data"
PEERS = HELPERS / "peers"  # scripts run by the HUD SDK's and openpi-client's venvs
VLA_EVAL_PEER = HELPERS / "vla_eval_peer"  # vla-eval's side: a model server, a benchmark
EXAMPLES = ROOT / "examples"
