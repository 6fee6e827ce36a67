"""The fork server: fresh sim and env-server processes without an interpreter's boot.

Most of a substrate's start is imports; :mod:`.zygote` pays them once and forks each child,
:mod:`.client` asks it (falling back to a plain spawn), :mod:`.learn` preloads what children
imported.
"""
