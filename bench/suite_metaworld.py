"""bench/suite.py's MetaWorld row: MT10 state-only, the plugin against a plain loop.

lerobot-eval cannot be the baseline here: lerobot 0.4.4's ``metaworld`` env type has
only pixel observations (``pixels`` / ``pixels_agent_pos`` with a 4-d agent_pos, every
step rendering 480x480 frames, ~90-240 ms each on this CPU) and needs a trained LeRobot
policy, while the shipped suite is state-only (the 39-d state) with metaworld's scripted
experts. The baseline is therefore what a user would write without the plugin: one
process, a plain loop over the same envs (``make_env(task)`` once per task, the row's
variation and seed) with the same expert policy, stopping at success or the 500-step
limit, as the suite's env does.

Rows (MT10 x ``--mw-variations`` goals, wall of the whole process each):

* plain loop: the loop above, in one process;
* plugin, shared 1: ``pytest --pyargs pytest_hud.suites.metaworld.mt10
  --hud-agent=pytest_hud.suites.metaworld:expert_agent --hud-shared=1`` (one sim process
  kept across items; a new task rebuilds its env in it);
* plugin -n 2, shared 1: the same with two xdist workers;
* plugin, fresh per item: the default (a fresh env server and sim per item).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PY = sys.executable
AGENT = "pytest_hud.suites.metaworld:expert_agent"

PLAIN_LOOP = """
import json, sys
from metaworld.policies import ENV_POLICY_MAP
from pytest_hud.suites.metaworld.sim import MAX_STEPS, make_env
from pytest_hud.suites.metaworld.tasks import mt10

envs, episodes, successes, steps = {}, 0, 0, 0
for task in mt10(int(sys.argv[1])):
    name, args = task.id, task.args
    env = envs.get(name) or envs.setdefault(name, make_env(name))
    policy = ENV_POLICY_MAP[name]()
    obs, _ = env.reset(seed=args["seed"], options={"variation": args["variation"]})
    success = False
    for t in range(MAX_STEPS):
        obs, _, term, trunc, info = env.step(policy.get_action(obs["observation/state"]))
        success |= bool(info.get("success"))
        if term or trunc:
            break
    episodes, successes, steps = episodes + 1, successes + success, steps + t + 1
print("PLAIN", json.dumps({"episodes": episodes, "success": successes, "steps": steps}))
"""

Timed = Callable[..., tuple[float, int]]


def metaworld(
    variations: int, work: Path, timed: Timed, load: dict[str, Any], fresh: bool = True
) -> dict[str, Any]:
    """Run the rows once each; print the table; return the figures."""
    folder = work / "metaworld"
    folder.mkdir(parents=True, exist_ok=True)
    n = 10 * variations
    runs: dict[str, dict[str, Any]] = {}
    log = folder / "plain.log"
    wall, rc = timed([PY, "-c", PLAIN_LOOP, str(variations)], folder, log)
    runs["plain loop (same envs, expert)"] = {"wall": wall, "rc": rc, "log": str(log)}
    for line in log.read_text().splitlines():
        if line.startswith("PLAIN "):
            runs["plain loop (same envs, expert)"].update(json.loads(line[6:]))
    cases: list[tuple[str, list[str]]] = [
        ("plugin, shared 1", ["--hud-shared=1"]),
        ("plugin -n 2, shared 1", ["--hud-shared=1", "-n", "2"]),
    ]
    if fresh:
        cases.append(("plugin, fresh per item", []))
    for name, extra in cases:
        runs[name] = _plugin(folder, name, variations, extra, timed)
    for r in runs.values():
        r["load"] = load.get(r["log"], (0.0, 0.0))
    _print(runs, n)
    return {"episodes": n, "runs": runs}


def _plugin(
    folder: Path, name: str, variations: int, extra: list[str], timed: Timed
) -> dict[str, Any]:
    slug = name.replace(" ", "").replace(",", "-")
    results = folder / f"{slug}.json"
    if variations == 5:
        target = ["--pyargs", "pytest_hud.suites.metaworld.mt10"]
    else:  # a JSONL of more (or fewer) goals per task
        from pytest_hud.suites.metaworld.tasks import MODULE, mt10

        rows = folder / f"mt10x{variations}.jsonl"
        lines = [json.dumps({**t.to_row(), "module": MODULE}) for t in mt10(variations)]
        rows.write_text("\n".join(lines) + "\n")
        target = [str(rows)]
    cmd = [PY, "-m", "pytest", *target, f"--hud-agent={AGENT}", f"--hud-results={results}"]
    cmd += ["-q", "-p", "no:cacheprovider", "--rootdir", str(folder), *extra]
    log = folder / f"{slug}.log"
    wall, rc = timed(cmd, folder, log)
    row: dict[str, Any] = {"wall": wall, "rc": rc, "log": str(log)}
    if results.exists():
        doc = json.loads(results.read_text())
        rows_ = doc.get("rollouts") or doc.get("rows") or []
        row.update(
            episodes=len(rows_),
            success=sum(bool(r.get("success")) for r in rows_),
            steps=sum(r.get("steps") or 0 for r in rows_),
            errors=sum(r.get("error") is not None for r in rows_),
        )
    return row


def _print(runs: dict[str, dict[str, Any]], n: int) -> None:
    base = runs["plain loop (same envs, expert)"]["wall"]
    print(f"\nMetaWorld MT10 state-only, {n} episodes, metaworld's expert policies")
    print(f"  {'run':<32} {'wall s':>7} {'ep/s':>6} {'steps/s':>8} {'time/plain':>10}  notes")
    for name, r in runs.items():
        own, other = r["load"]
        notes = [f"rc={r['rc']}"] if r["rc"] not in (0, 1) else []
        notes.append(f"cores used {own:.1f}, others {other:.1f}")
        if "episodes" in r:
            notes.append(f"{r['episodes']} eps, {r['success']} successes")
        if r.get("errors"):
            notes.append(f"{r['errors']} errors")
        steps = r.get("steps") or 0
        print(
            f"  {name:<32} {r['wall']:7.1f} {n / r['wall']:6.2f} {steps / r['wall']:8.0f} "
            f"{r['wall'] / base:10.2f}  {'; '.join(notes)}"
        )
    sys.stdout.flush()
