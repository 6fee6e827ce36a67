"""vla-eval interop, both ways (docs/guides/vla-eval.md). Agent side (``agent``, ``session``) and
env side (``bridge``, ``env``) never import each other.
"""
