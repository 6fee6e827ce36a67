"""Benchmark suites shipped with pytest-hud, each an env module with its rows (``tasks.jsonl``
packages, ``--pyargs pytest_hud.suites.NAME.PACKAGE``), its image requirements and, where one
can be had without a download, an expert that succeeds: :mod:`.metaworld`, :mod:`.libero`
(with LIBERO-PRO's perturbations), :mod:`.robosuite`, :mod:`.gymnasium_robotics` (Fetch and
FrankaKitchen), :mod:`.gym_hil`, :mod:`.kinetix`, :mod:`.maniskill` and :mod:`.genesis`
(through LeRobot's plugin discovery). Shared pieces: :mod:`.seeded` (rows task x seed),
:mod:`.control` (the scripted experts' rotations), :mod:`.files` (the shipped files' writer).
Guide: docs/guides/suites.md.
"""
