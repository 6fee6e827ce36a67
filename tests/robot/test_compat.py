"""robot/compat: a policy's expectations against an env's contract, row by row (no torch:
hand-written PolicySpecs; the LeRobot and openpi ones are in tests/plugin/test_preflight)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_hud.robot.compat import (
    MISMATCH,
    OK,
    RESIZE,
    WARN,
    Need,
    PolicySpec,
    Table,
    action_rows,
    chunk_row,
    compare,
    state_rows,
)
from pytest_hud.robot.contract import Contract

STATS = {"mean": [0.0, 0.0], "std": [1.0, 1.0]}
IMAGE = {"mean": [0.5, 0.5, 0.5], "std": [0.2, 0.2, 0.2]}
#: an ACT-like policy: one 96x96 camera, a 2-dim state with stats, a 2-dim action
POLICY = PolicySpec(
    "policy P",
    (
        Need("observation.images.top", "camera", (96, 96, 3), IMAGE, "MEAN_STD"),
        Need("observation.state", "state", (2,), STATS, "MEAN_STD"),
        Need("action", "action", (2,), STATS, "MEAN_STD"),
    ),
    chunk=8,
)


def contract(cameras: dict[str, list[int]], state: int | None = 2, action: int = 2) -> Contract:
    features: dict[str, Any] = {
        name: {"role": "observation", "type": "rgb", "shape": shape}
        for name, shape in cameras.items()
    }
    if state is not None:
        features["observation/state"] = {"role": "observation", "shape": [state]}
    features["action"] = {
        "role": "action",
        "shape": [action],
        "stats": {"min": [-1.0] * action, "max": [1.0] * action},
    }
    return Contract.from_dict({"features": features})


def verdicts(table: Table) -> dict[str, str]:
    return {r.feature: r.verdict for r in table.rows}


def test_an_honest_env_is_all_ok_and_a_camera_matches_by_name_or_order() -> None:
    for name in ("observation/images/top", "pixels"):  # by name, then the only one in order
        table = compare(POLICY, contract({name: [96, 96, 3]}), "env")
        assert set(verdicts(table).values()) == {OK}, table.render()
        assert not table.hard and not table.soft


def test_hard_mismatches_name_both_sides_and_the_fix() -> None:
    table = compare(POLICY, contract({}, action=3), "bare")
    got = verdicts(table)
    assert got["observation.images.top"] == MISMATCH
    assert got["action"] == MISMATCH
    assert got["observation.state"] == OK
    text = table.render()
    assert "policy P on env 'bare'" in text
    assert "add a camera to env 'bare'" in text and "[96, 96, 3]" in text
    assert "the policy writes 2 values per action, env 'bare' takes 3" in text
    stateless = compare(POLICY, contract({"pixels": [96, 96, 3]}, state=None), "blind")
    assert verdicts(stateless)["observation.state"] == MISMATCH
    assert "add a 2-dim observation to env 'blind'" in stateless.render()


def test_another_state_size_two_cameras_for_one_and_a_gray_camera() -> None:
    two = compare(POLICY, contract({"a": [96, 96, 3], "b": [96, 96, 3]}, state=7), "e")
    assert verdicts(two)["observation.state"] == MISMATCH
    assert "sends 7" in two.render()
    cams = next(r for r in two.rows if r.feature == "observation.images.top")
    assert cams.verdict == MISMATCH and "camera_map=" in cams.fix
    mapped = PolicySpec(POLICY.source, POLICY.needs, 8, {"b": "observation.images.top"})
    assert (
        verdicts(compare(mapped, contract({"a": [96, 96, 3], "b": [96, 96, 3]}), "e"))[
            "observation.images.top"
        ]
        == OK
    )
    gray = compare(POLICY, contract({"pixels": [96, 96, 1]}), "e")
    assert verdicts(gray)["observation.images.top"] == MISMATCH


def test_a_camera_of_another_size_is_a_resize_and_missing_stats_a_warning() -> None:
    table = compare(POLICY, contract({"pixels": [48, 64, 3]}), "small")
    assert verdicts(table)["observation.images.top"] == RESIZE
    assert "renders 64x48" in table.render() and "render it at 96x96" in table.render()
    bare = PolicySpec("P", (Need("observation.state", "state", (2,), None, "MEAN_STD"),))
    row = compare(bare, contract({}), "e").rows[-1]
    assert (row.feature, row.verdict) == ("normalization stats", WARN)
    assert "observation.state (mean/std)" in row.fix


def test_states_far_outside_the_stats_and_actions_outside_the_range() -> None:
    spaces = contract({}).spaces()
    near = [{"observation/state": np.array([0.5, -1.0])}] * 3
    far = [*near, {"observation/state": np.array([0.5, 40.0])}]
    assert [r.verdict for r in state_rows(POLICY, spaces, near)] == [OK]
    (row,) = state_rows(POLICY, spaces, far)
    assert row.verdict == WARN and "dim 1 is 40 at step 3" in row.fix
    inside = [np.array([0.5, -1.0])] * 2
    assert [r.verdict for r in action_rows(spaces, inside)] == [OK]
    (out,) = action_rows(spaces, [*inside, np.array([0.0, 3.0])], "P")
    assert out.verdict == WARN and "dims [1]" in out.fix
    assert action_rows(spaces, []) == []  # nothing emitted: nothing to say
    # trained on demonstrations the env clipped (their middle near the range): ok, said so
    clipped = action_rows(spaces, [np.array([0.0, 1.7])], "P", {"q50": [0.0, 0.9]})
    assert [r.verdict for r in clipped] == [OK] and "clipped" in clipped[0].provides
    # trained in other units (PushT's pixels against a [-1, 1] range): a warning
    pixels = action_rows(spaces, [np.array([250.0, 260.0])], "P", {"mean": [256.0, 256.0]})
    assert pixels[0].verdict == WARN and "centred at 256" in pixels[0].fix


def test_a_chunk_longer_than_the_episode() -> None:
    assert chunk_row(8, 3, "ended")[0].verdict == WARN
    assert chunk_row(8, 8, "ended")[0].verdict == OK
    assert chunk_row(8, None, "9 steps")[0].verdict == OK  # ran 9 steps without ending
    assert chunk_row(None, 3, "ended") == []


def test_a_policy_spec_travels_as_json() -> None:
    again = PolicySpec.from_dict(POLICY.to_dict(), "server S")
    assert again.needs == POLICY.needs and again.chunk == 8 and again.source == "server S"


@pytest.mark.parametrize("verdict", [OK, WARN])
def test_the_table_lists_fixes_only_for_rows_not_ok(verdict: str) -> None:
    from pytest_hud.robot.compat import Row

    table = Table("T", [Row("f", "a", "b", verdict, "do this")])
    assert ("do this" in table.render()) == (verdict != OK)
