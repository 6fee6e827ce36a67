"""The train/eval loop's env module sits next to its test file."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
