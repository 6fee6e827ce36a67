"""The shared bottom every layer stands on: child processes and their lifelines (``process``),
the line-delimited RPC of the control channels (``rpc``) and its session secret (``auth``),
model threads (``threads``), loading env modules (``loader``), traceback text (``tracebacks``),
joining a Ray cluster (``cluster``), lazy package exports (``lazy``) and the one error of a
parser of outside input (``parsing``). It imports nothing of pytest-hud above it.
"""
