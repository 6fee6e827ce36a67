"""Golden replay's verdict rules (pytest_hud.features.replay.judge) on arrays made by hand:
which env replays reproduce and which drift (where, on what), which policies match and
which diverge (on which dims, and which convention explains it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_hud.features.replay import judge
from pytest_hud.features.replay.plot import table_html, write_episode_plot

T = 40
RNG = np.random.default_rng(0)
STATE = RNG.normal(size=(T, 3)).cumsum(axis=0)
LABELS = {"observation.state": ["x", "y", "gripper_opening"]}
UNITS = {"observation.state": judge.scale(None, STATE)}


def env(live: np.ndarray, **kw):  # type: ignore[no-untyped-def]
    args = {"steps": (T, T), "success": (True, True), "terminated": (True, True)} | kw
    return judge.compare_env(
        {"observation.state": STATE}, {"observation.state": live}, UNITS, LABELS, **args
    )


def test_an_identical_replay_reproduces() -> None:
    check = env(STATE.copy())
    assert check.reproduces and check.first_drift_step is None and check.max_error == 0.0
    assert check.verdict.startswith(f"env reproduces ({T} steps, success True")
    assert check.error == [0.0] * T


def test_a_drift_names_its_first_step_and_its_worst_feature() -> None:
    live = STATE.copy()
    live[12:, 2] += np.linspace(0.0, 3.0, T - 12) * UNITS["observation.state"][2]  # grows
    check = env(live)
    assert not check.reproduces
    # step 12 adds 0; the first step past 0.05 std is the next one, on gripper_opening
    assert check.first_drift_step == 13
    assert check.max_error_feature == "gripper_opening" and check.max_error_step == T - 1
    assert check.max_error == pytest.approx(3.0)
    assert check.verdict.startswith("env drifts at step 13 (gripper_opening past 0.05 std;")
    # below the tolerance it reproduces
    small = STATE.copy()
    small[5, 0] += 0.01 * UNITS["observation.state"][0]
    assert env(small).reproduces


def test_success_length_and_features_are_part_of_reproducing() -> None:
    other = env(STATE.copy(), success=(True, False))
    assert not other.reproduces and other.first_drift_step is None
    assert "success True recorded, False replayed" in other.verdict
    shorter = env(STATE[:30].copy(), steps=(T, 30), terminated=(True, True))
    assert not shorter.reproduces
    assert f"episode ended after {T} steps recorded, ended after 30 replayed" in shorter.verdict
    running = env(STATE.copy(), terminated=(True, False))
    assert "still running after 40 replayed" in running.verdict
    missing = judge.compare_env(
        {"observation.state": STATE, "observation.environment_state": STATE},
        {"observation.state": STATE},
        UNITS | {"observation.environment_state": UNITS["observation.state"]},
        LABELS,
        steps=(T, T),
        success=(True, True),
        terminated=(True, True),
    )
    assert not missing.reproduces and missing.missing == ["observation.environment_state"]


def test_a_camera_drifts_past_its_pixel_tolerance() -> None:
    errors = np.full(T, 0.02)  # video compression
    assert env(STATE.copy(), images={"observation.images.top": errors}).reproduces
    errors[7:] = 0.3  # rendered differently from step 7
    check = env(STATE.copy(), images={"observation.images.top": errors})
    assert check.first_drift_step == 7
    assert "observation.images.top (mean pixel error 0.30)" in check.verdict
    frame = np.zeros((4, 5, 3), np.uint8)
    assert judge.image_error(frame, frame) == 0.0
    assert judge.image_error(frame + 51, frame) == pytest.approx(0.2)
    assert judge.image_error(frame[:2], frame) == 1.0  # another size: as different as can be


ACTIONS = np.stack(
    [np.sin(np.arange(T) / 5), np.cos(np.arange(T) / 7), np.sign(np.sin(np.arange(T) / 9))], 1
)
NAMES = ["dx", "dy", "gripper"]
A_UNITS = judge.scale(None, ACTIONS)


def policy(pred: np.ndarray, names: list[str] = NAMES, **kw):  # type: ignore[no-untyped-def]
    return judge.compare_policy(pred, ACTIONS, A_UNITS, names, **kw)


def test_an_imperfect_policy_matches_and_a_wiring_bug_does_not() -> None:
    noisy = ACTIONS + RNG.normal(scale=0.2, size=ACTIONS.shape) * A_UNITS
    noisy[10] += 2.5 * A_UNITS  # one bad step (a chunk boundary): the mean forgives it
    check = policy(noisy)
    assert check.matches and check.diverging == [] and check.cause is None
    assert check.dims[0].first_past == 10  # the max and the first step past still say so
    assert check.verdict.startswith("policy matches (mean error within 1 std on every dim")
    shifted = ACTIONS.copy()
    shifted[:, 1] += 1.5 * A_UNITS[1]  # every step off: wrong normalization of one dim
    bad = policy(shifted)
    assert not bad.matches and bad.diverging == [1] and bad.cause is None
    assert bad.dims[1].mean == pytest.approx(1.5) and bad.dims[1].first_past == 0
    assert bad.verdict.startswith("policy diverges on dims ['dy']: dy (mean 1.5 std, first past")
    assert len(bad.error) == T and len(bad.error[0]) == 3


def test_a_negated_gripper_is_named() -> None:
    flipped = ACTIONS.copy()
    flipped[:, 2] *= -1
    check = policy(flipped)
    assert check.diverging == [2]
    assert check.cause == "gripper matches when negated: gripper polarity"
    unnamed = policy(flipped, names=judge.dim_labels("action", 3))
    assert unnamed.cause is not None and unnamed.cause.startswith(
        "action[2] matches when negated: a sign convention (the last action dim"
    )
    middle = ACTIONS.copy()
    middle[:, 0] *= -1
    assert policy(middle).cause == "dx matches when negated: a sign convention"


def test_a_constant_dim_needs_a_tight_mirror_to_be_called_negated() -> None:
    rec = ACTIONS.copy()
    rec[:, 2] = -1.0  # the recording keeps the gripper closed all episode
    units = np.array([A_UNITS[0], A_UNITS[1], 1.0])
    loose, tight = rec.copy(), rec.copy()
    loose[:, 2] = 1.3  # an untrained policy's constant: opposite sign, not a mirror
    tight[:, 2] = 1.05  # the policy's gripper, negated
    assert judge.compare_policy(loose, rec, units, NAMES).cause is None
    assert judge.compare_policy(loose, rec, units, NAMES).diverging == [2]
    assert judge.compare_policy(tight, rec, units, NAMES).cause == (
        "gripper matches when negated: gripper polarity"
    )


def test_probes_name_the_input_that_explains_a_divergence() -> None:
    wrong = ACTIONS[::-1].copy()  # the policy reads something else entirely
    probes = {
        "camera 'top' flipped horizontally": wrong,
        "camera 'top' flipped vertically": ACTIONS,
    }
    check = policy(wrong, probes=probes)
    assert not check.matches
    assert check.cause == (
        "it matches with camera 'top' flipped vertically: the policy sees that input transformed"
    )
    assert policy(wrong, probes={"camera 'top' flipped horizontally": wrong}).cause is None


def test_units_are_the_dataset_spread_with_a_floor() -> None:
    values = np.array([[0.0, 1.0, 5.0], [0.0, 3.0, 5.0]])
    assert judge.scale(np.array([0.0, 1.0, 0.0]), values).tolist() == [1e-3, 1.0, 1e-3]
    assert judge.scale(None, values).tolist() == [1e-3, 1.0, 1e-3]  # from the values
    assert judge.scale(np.zeros(3), values, span=np.full(3, 2.0)).tolist() == [0.02] * 3
    assert judge.dim_labels("action", 2, ["a", "b"]) == ["a", "b"]
    assert judge.dim_labels("action", 2, ["a"]) == ["action[0]", "action[1]"]


def test_table_plot_and_html(tmp_path: Path) -> None:
    live = STATE.copy()
    live[20:, 0] += 1.0
    flipped = ACTIONS.copy()
    flipped[:, 2] *= -1
    blocks = []
    for i, (e, p) in enumerate(
        [(env(STATE.copy()), policy(ACTIONS)), (env(live), policy(flipped))]
    ):
        blocks.append(
            {
                "episode": i,
                "task": f"line/reach[seed={i}]",
                "passed": e.reproduces and p.matches,
                "verdict": f"{e.verdict}; {p.verdict}",
                "env": e.to_dict(),
                "policy": p.to_dict(),
            }
        )
    lines = judge.format_table(blocks)
    assert len(lines) == 1 + 2 * 2
    assert "line/reach[seed=1]" in lines[2] and lines[2].rstrip().endswith("gripper")
    assert lines[3].startswith("episode 0: env reproduces") and "env drifts at step 20" in lines[4]
    png = write_episode_plot(blocks[1], judge.Tolerances(), tmp_path / "ep1.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = table_html(blocks, "ds")
    assert page.count("<tr") == 3 and "Golden replay: ds" in page and "gripper" in page
