"""Evaluation beyond one run's pass/fail: statistics, gates, the episode ledger and
provenance, checkpoint comparison. Pure functions of result rows, no pytest imports;
nothing is imported eagerly, so scipy and matplotlib load only when a gate or plot needs
them.
"""
