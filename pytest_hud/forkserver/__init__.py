"""The fork server: fresh sim and env-server processes forked from a pre-imported zygote instead
of booting an interpreter.
"""
