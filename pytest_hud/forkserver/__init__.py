"""The fork server: fresh sim and env-server processes without an interpreter's boot.

Where a fresh substrate's ~0.6 s went (local runtime, CartPole, quiet 2-core machine,
measured before this package existed):

- ``python -c pass``: 30 ms;
- imports: ~550 ms. ``python -m pytest_hud.robot.sim.program`` imports the whole
  ``pytest_hud`` package (its ``__init__`` re-exports the public API: runtime, agent side,
  docker SDK), numpy (~160 ms of it), asyncio, gymnasium, websockets; ``import
  pytest_hud.robot.sim.program`` alone takes 630 ms as a process;
- the program itself (read the spec, build the bridge, make CartPole, listen, announce):
  ~20-50 ms; teardown 72 ms (mostly interpreter finalization);
- the subprocess runtime paid it twice: its env server's own boot and imports, then its
  sim's: 1.4-1.7 s per rollout.

:mod:`.zygote` pays the imports once and forks each child; :mod:`.client` asks it (and
falls back to a plain spawn); :mod:`.learn` lets it preload what its children imported.
Forked: a sim starts in 53-76 ms and stops in 8 ms (load ~7).
"""
