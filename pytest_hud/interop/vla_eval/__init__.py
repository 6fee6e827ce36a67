"""vla-eval (allenai's vla-evaluation-harness) interop, both directions: its model servers as
agents and its benchmarks as env modules (guide: docs/guides/vla-eval.md). The agent side
(``agent``, ``session``) and the env side (``bridge``, ``env``) never import each other;
``codec`` and ``specs`` are shared; ``preflight`` sees both.
"""
