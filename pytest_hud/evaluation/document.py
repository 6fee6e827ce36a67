"""The results JSON's shapes, as TypedDicts (the schema :func:`~.results.check_row` reads): a
rollout row, the stats of a set of rows, the document. A module of their own, below the
modules that build and read them (results, baseline, verdict, ledger)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Required, TypedDict

from pytest_hud.plumbing.jsonvalue import JSONValue

__all__ = [
    "Aggregate",
    "DatasetRef",
    "GateRecord",
    "ItemCounts",
    "Outcome",
    "ResultsDocument",
    "Row",
    "Stats",
]

Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]


class DatasetRef(TypedDict, total=False):
    """Where a row's episode was recorded (``--hud-record``): the dataset and the episode's
    index in it (None: not recorded, ``discarded`` says why); a worker's part until the
    merge points the row at the merged dataset (``part`` keeps the worker's)."""

    root: Required[str]
    episode_index: Required[int | None]
    frames: int
    discarded: str
    part: str


class Row(TypedDict, total=False):
    """One item's (or one wrapped episode's) results row: ``report.hud``, the results
    JSON's ``rollouts``, a ledger episode. Plain JSON-able values, so it crosses xdist;
    only ``nodeid`` and ``outcome`` are always there."""

    nodeid: Required[str]
    outcome: Required[str]  # an Outcome
    label: str
    group: str
    key: str | None
    task: str
    env: str | None
    task_id: str | None
    slug: str | None
    args: dict[str, JSONValue]
    rep: int
    seed: int | float | str | bool | None  # a JSON scalar: it keys pairings and resumes
    agent: str
    min_success: float | None
    strict: bool
    # the rollout's result (RolloutResult.report_fields)
    score: float | None
    success: bool | None
    total_reward: float | None
    steps: int | None
    terminated: bool | None
    truncated: bool | None
    cut_by_max_steps: bool | None
    duration: float
    prompt: str | None
    error: str | None
    error_type: str | None
    phase: str | None
    infer_s: float | None
    env_s: float | None
    policy_busy: float | None
    timing: dict[str, JSONValue] | None  # a timed loop's counters (--hud-realtime, --hud-latency)
    stopped: str | None  # who ended the episode early ("operator")
    grade_source: str | None  # who graded: "detector", "operator", "grader", ...
    notes: str | None  # the operator's notes
    # an attended (robot) session's (features/robots)
    robot: str  # the robot that ran the episode
    safety: dict[str, JSONValue]  # what the safety layer changed: clamped, limited (counts)
    discards: list[JSONValue]  # episodes of this row the operator discarded before this one
    put_off: int  # times the operator put the row off before it ran
    rubric: str  # what the operator graded against
    instructions: list[JSONValue]  # the operator's instructions to the policy: step, text
    episode_seconds: float  # from the episode's first frame to its end (no connect time)
    fault: dict[str, JSONValue]  # a robot fault: its kind and what the session did
    # a row not run: pytest's reason and, where a feature skipped it, why in one word
    skip_reason: str
    unrun: str  # "budget", "decided", "put off" or "quit"
    video: str | None
    dataset: DatasetRef | None
    # added by the plugin and its features
    arm: str  # several --hud-agent: the arm's letter (``agent`` is its name)
    arm_code: str  # a blinded session: the code the operator saw the arm under
    pair: str  # several --hud-agent: the node id without the arm's tag (one per row x repeat)
    task_pairs: int  # several --hud-agent: the pairs of this row's task in the session
    repro: str
    bar: float | None  # --hud-gate=sequential: the task's bar
    resumed: bool  # read back from --hud-resume's ledger
    resumed_from: str  # that ledger's path
    wrapped: bool  # an episode a test drove through wrap(env)
    worker: str  # a crashed xdist worker's row: which worker
    exitcode: int | None


class Stats(TypedDict):
    """The counts and rates of a set of rows (:func:`stats`): the results JSON's ``overall``
    and each entry of its ``per_env``, ``per_task`` and ``per_group``."""

    episodes: int  # graded: no error and a success verdict
    successes: int
    success_rate: float | None
    wilson_95: list[float] | None  # [low, high], episodes as the units
    rate_ci: list[float] | None  # the success rate's 95% interval with rows as the units
    rate_ci_method: str | None  # "wilson", "wilson (rows)" (repeats agree) or "rows (betting)"
    mean_score: float | None
    score_ci: list[float] | None  # the mean score's 95% interval over rows (scores in [0, 1])
    coverage: float | None  # graded / attempted (graded plus errors)
    mean_steps: float | None
    seconds: float
    errors: int
    expected_failures: int
    xfailed: int
    xpassed: int
    skipped: int
    resumed: int  # rows kept from a --hud-resume ledger (counted as graded too)
    rows: int  # distinct (key, group): the rows behind the repeats


class Aggregate(TypedDict):
    """:func:`stats` overall and per env, task (``env/template``) and test function."""

    overall: Stats
    per_env: dict[str, Stats]
    per_task: dict[str, Stats]
    per_group: dict[str, Stats]


class GateRecord(TypedDict):
    """A gate as the results JSON holds it (a :class:`Gate`'s fields)."""

    name: str
    passed: bool
    message: str


class ItemCounts(TypedDict, total=False):
    collected: Required[int | None]  # None: not known (a merged ledger)
    run: Required[int]
    #: rows not run, by why (``Row.unrun``): any but "decided" leaves the run incomplete
    unrun: dict[str, int]


class ResultsDocument(TypedDict, total=False):
    """The results JSON (``--hud-results``, ``ledger merge --results``): the aggregates, how
    the run went, its gates and rows, and those top-level fields of the plugin and its
    features (``pytest_hud_results_meta``) that a reader in this package takes; the others
    are in the file, not named here. Every field is written; none is required of a file
    read back (:func:`~.results.read_results` checks its rows and per-task counts only)."""

    version: int
    created: str
    complete: bool
    interrupted: bool
    items: ItemCounts
    overall: Stats
    per_env: dict[str, Stats]
    per_task: dict[str, Stats]
    per_group: dict[str, Stats]
    gates: list[GateRecord]
    rollouts: list[Row]
    agent: str | list[str]  # a merged ledger of several agents: each
    runtime: str
    group: int
    seed: int | None
    #: the session's Provenance; a merged ledger's, by run id
    provenance: Mapping[str, object] | None
    #: several --hud-agent: the comparisons (features/ab)
    paired: Mapping[str, object]
