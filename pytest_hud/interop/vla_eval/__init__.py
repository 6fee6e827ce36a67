"""vla-eval (allenai's vla-evaluation-harness) interop, both directions.

* its model servers as agents: ``--hud-agent=vla-eval:ws://HOST:PORT``, or
  :class:`~pytest_hud.interop.vla_eval.agent.VlaEvalAgent` in a conftest;
* its benchmarks as env modules: ``env.vla_eval(BenchmarkClass, **params)`` and
  :func:`~pytest_hud.interop.vla_eval.bridge.benchmark_rows`.

The agent side (``agent``, ``session``) and the env side (``bridge``, ``env``) never import
each other; ``codec`` and ``specs`` are shared; ``preflight`` sees both.
"""
