"""Benchmark suites that ship with pytest-hud: each an env module with its task rows,
the requirements an image serving it needs, and (where one exists) a policy that
really succeeds.

- :mod:`pytest_hud.suites.metaworld`: MetaWorld v3 (MT1/MT10/MT50), agent
  ``metaworld-expert``.
- :mod:`pytest_hud.suites.libero`: LIBERO (libero_spatial/object/goal/10/90), served from
  its own image (``--hud-runtime=docker``) or venv.
"""
