"""``python -m pytest_hud watch``: evaluate a training run's checkpoints as they appear.

The watcher follows a run's output folder (lerobot-train's ``checkpoints/NNNNNN/
pretrained_model`` by default, any ``--pattern`` otherwise) and, for each checkpoint once
it is completely written (:mod:`pytest_hud.watch.checkpoints` says when), runs the given
pytest suite on it in a child process (:mod:`pytest_hud.watch.session`). Outputs, under
``--out`` (default ``RUN/hud-watch``, created once the first checkpoint is evaluated, so
lerobot-train still finds its output folder new):

    results/STEP.json   each checkpoint's results JSON (--hud-results)
    ledger.jsonl        every episode of every checkpoint (--hud-ledger; also --hud-resume)
    watch.jsonl         one line per evaluated checkpoint: what a restart skips
    report.html         success vs step per task (Wilson 95%), the best checkpoint so far
    logs/STEP.log       each session's output; trackers/ for --hud-log's offline stores
"""

from __future__ import annotations

from pytest_hud.watch.cli import main

__all__ = ["main"]
