"""``python -m pytest_hud.ledger merge a.jsonl b.jsonl -o c.jsonl``: the episode ledger's
command line, kept at this documented path; ``python -m pytest_hud ledger merge ...`` is
the same command. The ledger itself is :mod:`pytest_hud.evaluation.ledger`; a run's
ledger plugin (``--hud-ledger``) is :mod:`pytest_hud._plugin.features.ledger`."""

from pytest_hud.evaluation.ledger import Ledger, key, main, merge, read

__all__ = ["Ledger", "key", "main", "merge", "read"]

if __name__ == "__main__":
    raise SystemExit(main())
