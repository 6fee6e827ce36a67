"""The LeRobot version seam (pytest_hud/robot/lerobot_version.py): its decisions are keyed
on the installed lerobot's version, a version outside the supported range is one clear
error, and the private attributes of LeRobot's objects are touched only there."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError
from pathlib import Path

import pytest
from needs import require_lerobot

import pytest_hud
from pytest_hud.robot import lerobot_version as compat

pytestmark = pytest.mark.lerobot_version

PACKAGE = Path(pytest_hud.__file__).parent


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The lerobot version compat reads, set by the test (``{}``: not installed); the real
    one is read again afterwards."""
    versions: dict[str, str] = {}

    def version(name: str) -> str:
        if name not in versions:
            raise PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(compat, "version", version)
    compat.lerobot_version.cache_clear()
    yield versions
    compat.lerobot_version.cache_clear()


@pytest.mark.parametrize(
    ("found", "which"),
    [
        ("0.4.3", "older than"),
        ("0.3.3", "older than"),
        ("0.7.0", "newer than"),
        ("1.0", "newer than"),
    ],
)
def test_a_version_outside_the_range_is_one_clear_error(
    installed: dict[str, str], found: str, which: str
) -> None:
    installed["lerobot"] = found
    with pytest.raises(compat.LeRobotVersionError) as caught:
        compat.require_supported()
    shown = ".".join(map(str, compat._parse(found)))
    assert str(caught.value) == (
        f"pytest-hud supports lerobot>=0.4.4,<0.7; installed: lerobot {shown}, {which} "
        "that range; fix: pip install 'lerobot>=0.4.4,<0.7'"
    )
    assert isinstance(caught.value, pytest_hud.HudError)


@pytest.mark.parametrize(
    ("found", "parsed"),
    [("0.4.4", (0, 4, 4)), ("0.5.0", (0, 5, 0)), ("0.6.1", (0, 6, 1)), ("0.6.2rc1", (0, 6, 2))],
)
def test_a_version_inside_the_range_is_returned(
    installed: dict[str, str], found: str, parsed: tuple[int, int, int]
) -> None:
    installed["lerobot"] = found
    assert compat.require_supported() == parsed


def test_no_lerobot_names_the_install_command(installed: dict[str, str]) -> None:
    with pytest.raises(
        compat.LeRobotVersionError,
        match=r"lerobot is not installed; .*"
        r"fix: pip install 'pytest-hud\[lerobot\]'",
    ):
        compat.require_supported()


@pytest.mark.parametrize(
    ("found", "expected"),
    [("0.4.4", False), ("0.5.1", False), ("0.6.0", False), ("0.6.1", True)],
)
def test_rollout_options_and_seeded_metaworld_follow_the_version(
    installed: dict[str, str], found: str, expected: bool
) -> None:
    """0.6.1 added both (read in each release's sources); 0.6.0 already has the lerobot
    modules but passes no reset options, so an import check would answer wrongly there."""
    installed["lerobot"] = found
    assert compat.metaworld_resets_are_seeded() is expected
    if not expected:
        assert compat.new_rollout_options() == {}


def test_rollout_options_are_what_the_installed_lerobot_eval_passes() -> None:
    """On the installed stack: 0.6.1's rollout resets with NEW_ROLLOUT_OPTION, older ones
    with no options (checked against lerobot-eval's own source)."""
    require_lerobot()
    import inspect

    from lerobot.scripts import lerobot_eval

    source = inspect.getsource(lerobot_eval.rollout)
    options = compat.new_rollout_options()
    if "NEW_ROLLOUT_OPTION: True" in source:
        from lerobot.envs.utils import NEW_ROLLOUT_OPTION

        assert options == {NEW_ROLLOUT_OPTION: True}
    else:
        assert "env.reset(seed=seeds)" in source and options == {}


def test_a_gym_aloha_outside_the_tested_releases_is_one_clear_error(
    installed: dict[str, str],
) -> None:
    installed["gym-aloha"] = "0.2.0"
    with pytest.raises(
        compat.LeRobotVersionError,
        match=r"needs gym-aloha>=0.1,<0.2; "
        r"installed: 0.2.0; fix: pip install 'gym-aloha>=0.1,<0.2'",
    ):
        compat.require_gym_aloha()
    installed["gym-aloha"] = "0.1.5"
    compat.require_gym_aloha()


#: private attributes of LeRobot's objects -> the modules allowed to touch them (compat's doc)
PRIVATE = {
    "_queues": {"robot/lerobot_version.py"},
    "_max_episode_steps": {"robot/lerobot_version.py"},
    "episode_buffer": {"robot/lerobot_version.py"},
    "_make_env_task": {"interop/lerobot/aloha.py"},
}


def test_private_lerobot_attributes_are_touched_only_behind_the_seam() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            name = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.value
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
                else None
            )
            if name in PRIVATE and where not in PRIVATE[name]:
                found.append(f"{where}:{node.lineno}: {name}")  # type: ignore[attr-defined]
    assert not found, "private LeRobot attributes outside compat:\n" + "\n".join(found)
