"""Evaluation beyond pass/fail: statistics, gates, ledger, provenance, comparison. Pure functions
of rows; nothing is imported eagerly.
"""
