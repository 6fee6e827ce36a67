"""``--hud-replay=DATASET``: one item per recorded episode, judging env replay and the policy's
open loop (guide: docs/guides/why.md).
"""

from __future__ import annotations

import types
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from pytest_hud._plugin.feature_api import (
    FeatureSettings,
    Figure,
    Hud,
    HudCase,
    ModuleColumnError,
    check_module_columns,
    option,
    readable_id,
)
from pytest_hud.errors import HudError
from pytest_hud.evaluation.results import Row
from pytest_hud.features.replay import judge
from pytest_hud.features.replay.judge import EnvCheck, PolicyCheck
from pytest_hud.runtime.rollout import RolloutResult
from pytest_hud.runtime.task import Task

if TYPE_CHECKING:
    from pytest_hud.robot.agent.agent import RobotAgent
    from pytest_hud.robot.contract import Spaces
    from pytest_hud.robot.record.reader import EpisodeInfo, Frames

__all__ = ["ReplayMismatch", "ReplayPlugin", "Settings", "enable"]


def _tolerances(text: str) -> judge.Tolerances:
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if name not in ("env", "policy", "image") or not number > 0:
            raise ValueError(
                f": expected env=STD, policy=STD or image=FRACTION (positive numbers, "
                f"comma-separated), got {part!r}"
            )
        values[name] = number
    return judge.Tolerances(**values)


def _dataset(text: str) -> Path:
    root = Path(text).expanduser().absolute()
    if not (root / "meta" / "info.json").is_file():
        raise ValueError(
            f": expected a LeRobot v3 dataset folder (with meta/info.json), got {root}; fix: "
            "pass the folder --hud-record wrote"
        )
    return root


class Settings(FeatureSettings):
    # the tolerances first: a bad one is reported before the dataset is looked at
    tolerances: judge.Tolerances = option(
        "--hud-replay-tolerance",
        "replay tolerances, comma-separated: env=STD (per step and state dimension, in the "
        "dataset's standard deviations; default 0.05), policy=STD (mean error per action "
        "dimension, same units; default 1.0), image=FRACTION (a frame's mean pixel error / "
        "255; default 0.1)",
        factory=judge.Tolerances,
        parse=_tolerances,
    )
    dataset: Path | None = option(
        "--hud-replay",
        "golden replay of a LeRobot v3 dataset recorded with --hud-record: one item per "
        "episode runs its recorded actions in the env from its recorded seed (env "
        "reproduces / drifts at step k) and, with --hud-agent, the policy on its recorded "
        "observations (policy matches / diverges on dims ...)",
        parse=_dataset,
    )


#: Image conventions tried on a diverging policy's cameras: (what, transform).
_IMAGE_PROBES = (
    ("flipped vertically", lambda img: img[::-1]),
    ("flipped horizontally", lambda img: img[:, ::-1]),
    ("turned 180 degrees", lambda img: img[::-1, ::-1]),
    ("its red and blue channels swapped", lambda img: img[..., ::-1]),
)


class ReplayMismatch(HudError, AssertionError):
    """A replayed episode whose env drifted or whose policy diverged: a test failure."""


class ReplayPlugin:
    """The replay items' judge and the replay's reports."""

    def __init__(self, hud: Hud, dataset: Path, tolerances: judge.Tolerances) -> None:
        from pytest_hud.errors import DatasetError
        from pytest_hud.robot.record.reader import RecordedDataset

        agents = hud.options.agents
        if len(agents) > 1:
            raise pytest.UsageError(
                f"--hud-replay judges one policy against the recording; got {len(agents)} "
                "--hud-agent values; fix: replay once per agent"
            )
        self.hud = hud
        self.agent_given = hud.agent_given
        self.tol = tolerances
        try:
            self.dataset = RecordedDataset.open(dataset)
        except (DatasetError, OSError, ValueError) as exc:
            raise pytest.UsageError(f"--hud-replay: {exc}") from None
        found, without = episode_cases(self.dataset.episodes)
        if not found:
            raise pytest.UsageError(
                f"--hud-replay: no episode of {dataset} records the row it ran "
                f"({', '.join(without[:5])}...); fix: record it with --hud-record (pytest-hud "
                "keeps each episode's row and contract in meta/episodes)"
            )
        try:  # serving a row imports its module column: the task files' rule applies
            roots = (Path(str(hud.config.rootpath)), self.dataset.root)
            rows = [case.row for case, _, _ in found]
            check_module_columns(rows, str(dataset), roots, hud.options.allow_modules)
        except ModuleColumnError as exc:
            raise pytest.UsageError(f"--hud-replay: {exc}") from None
        self.skipped = without
        self.cases = [case for case, _, _ in found]
        self.ids = [name for _, name, _ in found]
        self._episodes = {id(case): ep for case, _, ep in found}
        self._frames: dict[int, Frames] = {}
        self.info = dataset / "meta" / "info.json"
        collect_dataset(hud.config, self.info)

    # -- collection and the rollout's agent ----------------------------------------------------
    @pytest.hookimpl
    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> ReplayFile | None:
        if file_path.resolve() != self.info.resolve():
            return None
        root, base = self.dataset.root, Path(str(self.hud.config.rootpath))
        name = root.relative_to(base).as_posix() if root.is_relative_to(base) else str(root)
        collected: ReplayFile = ReplayFile.from_parent(parent, path=file_path, nodeid=name)
        collected.plugin = self
        return collected

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Load the policy before any item runs: a bad --hud-agent, or one without a model
        to run open loop, is one usage error."""
        from pytest_hud.robot.agent.agent import RobotAgent

        if not self.agent_given or self.hud.is_worker:
            return
        agent = self.hud.load_agent()
        if not isinstance(agent, RobotAgent):
            raise pytest.UsageError(
                "--hud-replay: the policy check runs a RobotAgent's adapter and model on the "
                f"recorded observations; --hud-agent gave {type(agent).__name__}; fix: pass "
                "a RobotAgent, or drop --hud-agent for an env-only replay"
            )

    def frames(self, case: HudCase) -> tuple[EpisodeInfo, Frames]:
        episode = self._episodes[id(case)]
        if episode.index not in self._frames:
            self._frames[episode.index] = self.dataset.frames(episode)
        return episode, self._frames[episode.index]

    def replay_agent(self, case: HudCase) -> RobotAgent:
        from pytest_hud.robot.record.recorded_actions import replay_agent

        episode, frames = self.frames(case)
        return replay_agent(
            frames, self.dataset.fps, judge.image_error, name=f"replay:episode {episode.index}"
        )

    # -- judging one episode -------------------------------------------------------------------
    def judge(self, item: pytest.Item, case: HudCase, result: RolloutResult) -> None:
        """Both checks; the block goes on the item's row; a mismatch fails the item."""
        __tracebackhide__ = True
        episode, frames = self.frames(case)
        env = self._env_check(episode, frames, result)
        policy = self._policy_check(episode, frames) if self.agent_given else None
        passed = env.reproduces and (policy is None or policy.matches)
        verdict = (
            env.verdict + "; " + (policy.verdict if policy else "no policy check (no --hud-agent)")
        )
        item.stash[_BLOCK] = {
            "episode": episode.index,
            "task": case.id,
            "dataset": str(self.dataset.root),
            "passed": passed,
            "verdict": verdict,
            "env": env.to_dict(),
            "policy": None if policy is None else policy.to_dict(),
        }
        if not passed:
            raise ReplayMismatch(f"episode {episode.index}: {verdict}")

    def _labels(self, episode: EpisodeInfo) -> dict[str, list[str]]:
        from pytest_hud.robot.record.reader import episode_schema

        assert episode.contract is not None, "episodes without one are not collected"
        schema = episode_schema(episode.contract, self.dataset.fps, video=True)
        out = {}
        for key, feats, sizes in schema.vectors():
            width = int(np.prod(self.dataset.features[key]["shape"]))
            names: list[str] = []
            for f, size in zip(feats, sizes, strict=True):
                n = size if size is not None else width - sum(s or 0 for s in sizes)
                own = list(f.names) if f.names and len(f.names) == n else None
                names += own or ([f.name] if n == 1 else [f"{f.name}[{i}]" for i in range(n)])
            out[key] = names
        return out

    def _env_check(self, episode: EpisodeInfo, frames: Frames, result: RolloutResult) -> EnvCheck:
        live = result.agent_info.get("replay") or {}
        vectors = {k: v for k, v in frames.vectors.items() if k.startswith("observation.")}
        got = dict(live.get("vectors") or {})
        units = {k: judge.scale(self.dataset.std(k), v) for k, v in vectors.items()}
        labels = self._labels(episode)
        for key, value in vectors.items():
            labels.setdefault(key, judge.dim_labels(key, value.shape[1]))
        replayed = len(next(iter(got.values()))) if got else int(result.steps or 0)
        return judge.compare_env(
            vectors,
            got,
            units,
            labels,
            steps=(episode.length, replayed),
            success=(episode.success, result.success),
            terminated=(bool(frames.done[-1]), bool(live.get("terminated"))),
            images=live.get("image_error") or {},
            tol=self.tol,
        )

    def _policy_check(self, episode: EpisodeInfo, frames: Frames) -> PolicyCheck:
        from pytest_hud.robot.agent.agent import RobotAgent
        from pytest_hud.robot.contract import Contract
        from pytest_hud.robot.record.reader import env_observations, episode_schema

        agent = self.hud.load_agent()
        assert isinstance(agent, RobotAgent), "checked at collection (pytest_collection_finish)"
        assert episode.contract is not None, "episodes without one are not collected"
        spaces = Contract.from_dict(episode.contract).spaces()
        schema = episode_schema(episode.contract, self.dataset.fps, video=True)
        observations = env_observations(schema, frames, self.dataset.features)
        recorded = frames.actions
        names = self._action_names(episode, recorded.shape[1])
        units = judge.scale(self.dataset.std("action"), recorded, _span(spaces))
        predicted = self._open_loop(agent, spaces, observations, episode.task)
        check = judge.compare_policy(predicted, recorded, units, names, tol=self.tol)
        if check.matches or check.cause is not None or not schema.cameras:
            return check
        probes = {}
        for cam in schema.cameras:
            for what, change in _IMAGE_PROBES:
                changed = [
                    {**o, cam.feature: np.ascontiguousarray(change(o[cam.feature]))}
                    for o in observations
                ]
                probes[f"camera {cam.feature!r} {what}"] = self._open_loop(
                    agent, spaces, changed, episode.task
                )
        return judge.compare_policy(predicted, recorded, units, names, probes=probes, tol=self.tol)

    def _open_loop(
        self,
        agent: RobotAgent,
        spaces: Spaces,
        observations: Sequence[dict[str, np.ndarray]],
        prompt: str,
    ) -> np.ndarray:
        from pytest_hud.robot.agent.open_loop import open_loop

        return self.hud.run(
            open_loop(agent, spaces, observations, prompt), self.hud.options.timeout
        )

    def _action_names(self, episode: EpisodeInfo, size: int) -> list[str]:
        names = self.dataset.features.get("action", {}).get("names")
        if not names and episode.contract:
            from pytest_hud.robot.contract import Contract

            names = Contract.from_dict(episode.contract).spaces().action_feature.names
        return judge.dim_labels("action", size, list(names) if names else None)

    # -- reporting -------------------------------------------------------------------------------
    @pytest.hookimpl
    def pytest_hud_row(self, item: pytest.Item, row: Row) -> None:
        block = item.stash.get(_BLOCK, None)
        if block is not None:
            row["replay"] = block  # type: ignore[typeddict-unknown-key]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.excinfo is not None and isinstance(call.excinfo.value, ReplayMismatch):
            report.longrepr = f"{item.nodeid}: {call.excinfo.value}"
        return report

    def blocks(self) -> list[dict[str, Any]]:
        """Every judged episode's block, in episode order (where rows are collected)."""
        rows = self.hud.rows.values()
        found = [r["replay"] for r in rows if r.get("replay")]  # type: ignore[typeddict-item]
        return sorted(found, key=lambda b: b["episode"])

    @pytest.hookimpl
    def pytest_hud_results_meta(self) -> dict[str, object]:
        blocks = self.blocks()
        policy = [b for b in blocks if b["policy"] is not None]
        return {
            "replay": {
                "dataset": str(self.dataset.root),
                "tolerances": {
                    "env": self.tol.env,
                    "policy": self.tol.policy,
                    "image": self.tol.image,
                },
                "episodes": len(blocks),
                "env_reproduces": sum(1 for b in blocks if b["env"]["reproduces"]),
                "policy_matches": sum(1 for b in policy if b["policy"]["matches"])
                if policy
                else None,
                "without_row": self.skipped,
                "verdicts": [
                    {"episode": b["episode"], "task": b["task"], "verdict": b["verdict"]}
                    for b in blocks
                ],
            }
        }

    @pytest.hookimpl
    def pytest_hud_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        blocks = self.blocks()
        if not blocks:
            return
        tr = terminalreporter
        tr.write_sep("-", f"hud replay: {self.dataset.root}")
        lines = judge.format_table(blocks)
        for line in lines[: len(blocks) + 1]:
            tr.write_line(line)
        for block, line in zip(blocks, lines[len(blocks) + 1 :], strict=True):
            tr.write_line(line, green=block["passed"], red=not block["passed"])
        if self.skipped:
            tr.write_line(f"not replayed (no recorded row): {', '.join(self.skipped)}")

    @pytest.hookimpl
    def pytest_hud_html_figures(self) -> list[Figure]:
        """One plot per judged episode (error over time), for the html report."""
        from pytest_hud.features.replay.plot import write_episode_plot

        folder = self.hud.artifacts / "replay"
        out = []
        for block in self.blocks():
            path = folder / f"episode-{block['episode']}.png"
            try:
                write_episode_plot(block, self.tol, path)
            except Exception as exc:  # matplotlib missing: the table still says it all
                return [Figure(path, f"replay plots not drawn: {type(exc).__name__}: {exc}")]
            out.append(
                Figure(path, f"episode {block['episode']} {block['task']}: {block['verdict']}")
            )
        return out

    @pytest.hookimpl
    def pytest_hud_html_sections(self) -> list[str]:
        """The replay table for the html report's summary (none when nothing was judged)."""
        from pytest_hud.features.replay.plot import table_html

        blocks = self.blocks()
        return [table_html(blocks, str(self.dataset.root))] if blocks else []


_BLOCK = pytest.StashKey[dict[str, Any]]()


def _span(spaces: Spaces) -> np.ndarray | None:
    """The action's declared range (contract stats max - min), if the contract has one."""
    stats = spaces.action_feature.stats or {}
    if "min" not in stats or "max" not in stats:
        return None
    return np.asarray(stats["max"], np.float64) - np.asarray(stats["min"], np.float64)


def enable(settings: Settings, hud: Hud) -> ReplayPlugin | None:
    """The feature's plugin for this session (--hud-replay), else None."""
    if settings.dataset is None:
        return None
    return ReplayPlugin(hud, settings.dataset, settings.tolerances)


# -- the items: a dataset's meta/info.json collects as one test parametrized over its
# episodes (recorded row and seed), whose hud_agent replays the recorded actions ------


def collect_dataset(config: pytest.Config, info: Path) -> None:
    """Make pytest collect ``info`` (the dataset's meta/info.json): in place of the
    rootdir / testpaths when no test path was given, else beside the given ones."""
    given = config.args_source == pytest.Config.ArgsSource.ARGS
    resolved = info.resolve()
    if not given:
        config.args = [str(info)]
        return
    for arg in config.args:
        path = Path(arg.split("::", 1)[0]).resolve()
        if path == resolved or resolved.is_relative_to(path):
            return
    config.args = [*config.args, str(info)]


def episode_cases(
    episodes: list[EpisodeInfo],
) -> tuple[list[tuple[HudCase, str, EpisodeInfo]], list[str]]:
    """``(case, test id, episode)`` per episode with a recorded row and contract, and the
    episodes without (recorded before pytest-hud kept them, or not by pytest-hud)."""
    found, skipped = [], []
    for ep in episodes:
        if not ep.row or not ep.contract:
            skipped.append(f"episode {ep.index}")
            continue
        task = Task.from_row(ep.row, f"episode {ep.index}")
        found.append((HudCase(task, 0, task, 1), f"episode{ep.index}-{readable_id(task)}", ep))
    return found, skipped


class ReplayFile(pytest.Module):
    """The dataset's meta/info.json, collected as a module with one parametrized test."""

    plugin: ReplayPlugin  # the feature's plugin that collected it

    def _getobj(self) -> object:
        plugin = self.plugin
        module = types.ModuleType("hud_replay")
        module.__file__ = str(self.path)
        cases, ids = plugin.cases, plugin.ids

        @pytest.fixture(name="hud_agent")
        def replay_actions(hud_task: HudCase) -> RobotAgent:
            """This episode's recorded actions as the rollout's agent."""
            return plugin.replay_agent(hud_task)

        @pytest.mark.parametrize("hud_task", cases, ids=ids)
        def test_replay(
            hud_result: RolloutResult, hud_task: HudCase, request: pytest.FixtureRequest
        ) -> None:
            """Passes when the env reproduces the episode and the policy (if given)
            matches its actions."""
            __tracebackhide__ = True
            plugin.judge(request.node, hud_task, hud_result)

        module.replay_actions = replay_actions  # type: ignore[attr-defined]
        module.test_replay = test_replay  # type: ignore[attr-defined]
        return module
