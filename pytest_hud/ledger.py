"""``python -m pytest_hud.ledger merge a.jsonl b.jsonl -o c.jsonl``: the episode ledger's
command line; the ledger itself lives in :mod:`pytest_hud.evaluation.ledger`."""

from pytest_hud.evaluation.ledger import Ledger, key, main, merge, read

__all__ = ["Ledger", "key", "main", "merge", "read"]

if __name__ == "__main__":
    raise SystemExit(main())
