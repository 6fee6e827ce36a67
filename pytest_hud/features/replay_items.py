"""``--hud-replay``'s items: a dataset's ``meta/info.json`` collects as one test parametrized over
its episodes (recorded row and seed), whose ``hud_agent`` replays the recorded actions.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_hud._plugin.cases import HudCase, readable_id
from pytest_hud.runtime.task import Task

if TYPE_CHECKING:
    from pytest_hud.features.replay import ReplayPlugin
    from pytest_hud.robot.record.reader import EpisodeInfo

__all__ = ["ReplayFile", "collect_dataset", "episode_cases"]


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

    def _getobj(self) -> Any:
        plugin: ReplayPlugin | None = self.config.pluginmanager.get_plugin("pytest-hud-replay")
        assert plugin is not None, "collected only while the replay feature is registered"
        module = types.ModuleType("hud_replay")
        module.__file__ = str(self.path)
        cases, ids = plugin.cases, plugin.ids

        @pytest.fixture(name="hud_agent")
        def replay_actions(hud_task: HudCase) -> Any:
            """This episode's recorded actions as the rollout's agent."""
            return plugin.replay_agent(hud_task)

        @pytest.mark.parametrize("hud_task", cases, ids=ids)
        def test_replay(hud_result: Any, hud_task: HudCase, request: pytest.FixtureRequest) -> None:
            """Passes when the env reproduces the episode and the policy (if given)
            matches its actions."""
            __tracebackhide__ = True
            plugin.judge(request.node, hud_task, hud_result)

        module.replay_actions = replay_actions  # type: ignore[attr-defined]
        module.test_replay = test_replay  # type: ignore[attr-defined]
        return module
