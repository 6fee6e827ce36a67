"""The compatibility preflight: one short probe episode per env through the real path, setting the
env's contract against what the policy expects (:mod:`pytest_hud.robot.compat`).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from pytest_hud.robot.agent.agent import RobotAgent, RunSettings
from pytest_hud.robot.agent.expects import declares, policy_spec
from pytest_hud.robot.compat import (
    MISMATCH,
    WARN,
    PolicySpec,
    Row,
    Table,
    action_rows,
    chunk_row,
    compare,
    state_rows,
)
from pytest_hud.robot.contract import Contract, Spaces
from pytest_hud.robot.episode import EpisodeReport
from pytest_hud.runtime.contracts import contract_of, declared_robots, run_apart
from pytest_hud.runtime.control import Run
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.rollout import rollout
from pytest_hud.runtime.task import Task

__all__ = ["PROBE_STEPS", "PROBE_TIMEOUT", "Subject", "check_agent", "first_rows", "subjects"]

#: Steps a probe episode runs at least (more when the policy's chunk is longer, up to
#: :data:`PROBE_CAP`), so the first chunk is executed whole and a second one asked for.
PROBE_STEPS = 5
PROBE_CAP = 200
#: Seconds one probe episode may take, the env's boot and the policy's first forward included.
PROBE_TIMEOUT = 300.0


@dataclass(frozen=True)
class Subject:
    """One env to check against: its name and the row a probe episode runs (None: its
    declared contract only)."""

    env: str
    task: Task | None = None


def first_rows(tasks: Iterable[Task]) -> list[Subject]:
    """The first row of each env, in order."""
    seen: dict[str, Subject] = {}
    for task in tasks:
        seen.setdefault(task.env, Subject(task.env, task))
    return list(seen.values())


def subjects(tasks: Iterable[Task] = ()) -> list[Subject]:
    """``tasks``' envs (their first rows), then every other robot env the imported modules
    declare (a row it declared, else its contract alone)."""
    from pytest_hud.runtime.modules import declared_environments

    found = {s.env: s for s in first_rows(tasks)}
    declared = {env.name: env for env, _ in declared_environments()}
    for label in declared_robots():
        name = label.split(".", 1)[0]
        if name not in found:
            env = declared.get(name)
            rows = list(env.tasks) if env is not None else []
            found[name] = Subject(name, rows[0] if rows else None)
    return list(found.values())


@dataclass
class _Recorder:
    """The probe episode's observations and executed actions (an EpisodeObserver)."""

    frames: list[dict[str, np.ndarray]] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)

    def step(self, data: dict[str, object], action: np.ndarray) -> None:
        arrays = {k: np.asarray(v) for k, v in data.items()}
        self.frames.append({k: a.copy() for k, a in arrays.items() if a.ndim <= 1})
        self.actions.append(np.array(action, np.float64))

    def end(self, ok: bool) -> dict[str, object]:
        return {}


def _vla_eval_rows(agent: object, spaces: Spaces) -> list[Row] | None:
    """A vla-eval server's HELLO specs against the env (None: not a vla-eval agent)."""
    module = sys.modules.get("pytest_hud.interop.vla_eval.agent")
    if module is None or not isinstance(agent, module.VlaEvalAgent):
        return None
    from pytest_hud.interop.vla_eval.specs import check_specs

    info = agent.model.server_info
    found = check_specs(info, spaces, module.env_specs(spaces))
    rows = [
        Row("vla-eval specs", "server's HELLO", "env contract", MISMATCH, e) for e in found.errors
    ]
    for side, component, server, env in found.warnings:
        fix = f"the server's {component} is {server}, the env's {env}: convert on one side"
        rows.append(Row(f"{side} {component}", server, env, WARN, fix))
    return rows


@dataclass
class _Probe:
    agent: RobotAgent
    label: str
    env: str
    max_steps: int | None
    table: Table | None = None
    spec: PolicySpec | None = None
    spaces: Spaces | None = None
    recorder: _Recorder = field(default_factory=_Recorder)
    report: EpisodeReport | None = None
    limit: int = PROBE_STEPS

    async def static(self, contract: Contract) -> Table:
        self.spaces = contract.spaces()
        vla = _vla_eval_rows(self.agent, self.spaces)
        if vla is not None:
            return Table(_title(self.label, self.env), vla)
        self.spec = await policy_spec(self.agent, self.label)
        if self.spec is None:
            return Table(_title(self.label, self.env))
        return compare(self.spec, contract, self.env)

    async def __call__(self, run: Run) -> EpisodeReport | None:
        """The probe episode's agent: the static rows, then (if nothing is missing) the
        agent itself for the first steps."""
        robot = run.robot
        contract = Contract.from_dict((robot.get("params") or {}).get("contract"))
        self.table = await self.static(contract)
        if self.table.hard:
            return None
        chunk = self.spec.chunk if self.spec is not None else None
        self.limit = min(max(PROBE_STEPS, (chunk or 0) + 1), PROBE_CAP)
        if self.max_steps is not None:
            self.limit = min(self.limit, self.max_steps)
        recorder = self.recorder
        settings = RunSettings(max_steps=self.limit, observers=(lambda run, spaces: recorder,))
        # a shallow copy without the agent's own observers: the probe episode is no
        # episode of the user's (a recording observer must not see it)
        agent = copy.copy(self.agent)
        agent.observers = []
        self.report = await agent(run, settings)
        return None  # the probe's own report: this episode is not graded

    def run_rows(self) -> list[Row]:
        """What the first steps showed: states, actions, the chunk against the episode."""
        if self.spaces is None:
            return []
        rows: list[Row] = []
        if self.spec is not None:
            rows += state_rows(self.spec, self.spaces, self.recorder.frames)
        needs = self.spec.of_kind("action") if self.spec is not None else []
        trained = needs[0].stats if needs else None
        rows += action_rows(self.spaces, self.recorder.actions, self.label, trained)
        steps = self.report.steps if self.report is not None else 0
        length, why = None, f"{steps} steps"
        if self.report is not None and self.report.terminated and steps:
            length, why = steps, "ended in the preflight"
        if self.max_steps is not None and (length is None or self.max_steps < length):
            length, why = self.max_steps, "--hud-max-steps"
        if not steps and length is None:
            return rows
        rows += chunk_row(self.spec.chunk if self.spec else None, length, why)
        return rows


def _title(label: str, env: str) -> str:
    return f"pytest-hud preflight: agent {label} on env {env!r}"


def _first_line(text: str | None) -> str:
    """An error's first line; for one that quotes a traceback, also its last line."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    if not lines:
        return "?"
    if lines[0].endswith(":") and len(lines) > 1:  # "... failed:" then a traceback
        tail = next((x for x in reversed(lines) if not x.startswith(("File ", "^", "~"))), "")
        return f"{lines[0]} {tail}"
    return lines[0]


async def _probe(
    agent: RobotAgent,
    label: str,
    subject: Subject,
    provider: Provider,
    max_steps: int | None,
    timeout: float,
) -> Table:
    if subject.task is None:  # no row to run: the declared contract alone
        copies = declared_robots().get(subject.env) or []
        probe = _Probe(agent, label, subject.env, max_steps)
        if not copies:
            return Table(_title(label, subject.env))
        return await probe.static(contract_of(copies))
    probe = _Probe(agent, label, subject.env, max_steps)
    result = await rollout(subject.task, probe, provider, timeout=timeout)
    table = probe.table or Table(_title(label, subject.env))
    if result.error is not None and result.phase == "agent" and probe.table is not None:
        if result.error_type == "TimeoutError":
            fix = f"the policy did not act within {timeout:g} s: its run was not checked"
            table.rows.append(Row("policy run", "-", "-", WARN, fix))
        else:
            fix = f"{result.error_type}: {_first_line(result.error)}"
            table.rows.append(
                Row("policy run", "acts on the env's observations", "-", MISMATCH, fix)
            )
    elif result.error is not None and probe.table is None:
        fix = (
            f"could not start a preflight episode of {subject.task.key} "
            f"({result.error_type} in {result.phase}: {_first_line(result.error)}): not checked"
        )
        table.rows.append(Row("env", "-", "-", WARN, fix))
    table.rows += probe.run_rows()
    return table


def check_agent(
    agent: object,
    label: str,
    envs: list[Subject],
    provider: Provider,
    *,
    max_steps: int | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> list[Table]:
    """One table per env for ``agent`` (an agent whose policy declares nothing: none)."""
    if not isinstance(agent, RobotAgent) or not (declares(agent) or _is_vla_eval(agent)):
        return []  # declares and vla-eval's agents are RobotAgents

    async def main() -> list[Table]:
        try:
            return [await _probe(agent, label, s, provider, max_steps, timeout) for s in envs]
        finally:
            await agent.aclose()  # what it kept lives on this loop, which ends here

    return run_apart(main(), timeout=timeout * max(len(envs), 1) + 60)


def _is_vla_eval(agent: object) -> bool:
    module = sys.modules.get("pytest_hud.interop.vla_eval.agent")
    return module is not None and isinstance(agent, module.VlaEvalAgent)
