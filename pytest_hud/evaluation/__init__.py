"""Evaluation beyond one run's pass/fail: sequential gates, the episode ledger and
provenance, and checkpoint comparison. Standalone modules the pytest plugin calls;
import them directly (nothing here is imported eagerly, so scipy/matplotlib load only
when a gate or a plot is used).

    sequential     ThresholdGate, BaselineGate, FixedThresholdGate, Decision, Verdict
    mixture        the threshold gate's beta-mixture boundaries
    step_tables    STEP decision tables for BaselineGate, cached outside site-packages
    ledger         Ledger (fsync'd JSONL), read, merge, key, results
    provenance     collect, checkpoint_hash, git_revision, repro_command, ...
    proportions    Fisher / McNemar exact p-values, Newcombe intervals
    compare        compare, load_run, format_table, drops; CLI
    compare_plot   figure, write_plot
"""
