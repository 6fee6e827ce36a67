"""The fork server: fresh sim and env-server processes without an interpreter's boot.

Most of a fresh substrate's start is imports (numpy, asyncio, gymnasium, websockets,
pytest_hud), paid again by every sim and, on the subprocess runtime, by its env server
too. :mod:`.zygote` pays the imports once and forks each child; :mod:`.client` asks it
(and falls back to a plain spawn); :mod:`.learn` lets it preload what its children
imported. Figures: docs/performance.md.
"""
