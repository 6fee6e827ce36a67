"""The watcher's rules without running an evaluation: which folders are checkpoints and
their steps, when a checkpoint is complete (a real lerobot checkpoint replayed file by file
in the order lerobot-train's save_checkpoint writes it), its index (resume) and when it
stops (the final step from train_config.json, --final-step, --until-step)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from checkpoint_replay import SHIPPED, link_last, save_stages

from pytest_hud.watch import index
from pytest_hud.watch.checkpoints import (
    Checkpoint,
    Pattern,
    Readiness,
    content_problems,
    final_step,
    lerobot_last_step,
)
from pytest_hud.watch.cli import Watcher, parse
from pytest_hud.watch.report import best, render


def _link_last(run: Path, step: int) -> None:
    link_last(run, step)


def _save_like_lerobot(run: Path, step: int) -> list[Path]:
    return list(save_stages(run, step))


def test_pattern_steps_and_scan(tmp_path: Path) -> None:
    lerobot = Pattern("checkpoints/{step}/pretrained_model")
    assert lerobot.step_of("checkpoints/002000/pretrained_model") == 2000
    assert lerobot.step_of("checkpoints/last/pretrained_model") is None
    assert lerobot.step_of("checkpoints/002000/pretrained_model/x") is None
    custom = Pattern("runs/*/ckpt-{step}")
    assert custom.step_of("runs/a/ckpt-15") == 15 and custom.step_of("runs/a/b/ckpt-15") is None
    with pytest.raises(ValueError, match="exactly one"):
        Pattern("checkpoints/*")
    for step in (100, 200):
        (tmp_path / "checkpoints" / f"{step:06d}" / "pretrained_model").mkdir(parents=True)
    _link_last(tmp_path, 200)
    assert sorted(lerobot.scan(tmp_path)) == [100, 200]  # `last` is no checkpoint
    assert lerobot_last_step(tmp_path) == 200
    assert lerobot.scan(tmp_path / "not-yet") == {}


def test_a_lerobot_checkpoint_is_complete_only_once_lerobot_marked_it(tmp_path: Path) -> None:
    """Replayed in save_checkpoint's order with ``last`` at the previous step: every stage,
    each polled twice, is incomplete; it is complete once ``last`` moves to it."""
    ready = Readiness(tmp_path)
    _link_last(tmp_path, 100)
    ckpt = Checkpoint(200, tmp_path / "checkpoints" / "000200" / "pretrained_model")
    for stage in _save_like_lerobot(tmp_path, 200):
        assert ready.check(Checkpoint(200, stage), 100) is not None
        assert ready.check(Checkpoint(200, stage), 100) is not None
    assert "not marked it saved" in str(ready.check(ckpt, lerobot_last_step(tmp_path)))
    _link_last(tmp_path, 200)
    assert ready.check(ckpt, lerobot_last_step(tmp_path)) is None


def test_without_a_marker_whole_content_and_an_unchanged_listing(tmp_path: Path) -> None:
    """No ``last`` link (a copied run, another trainer): a stage whose content is not whole
    (a half weights file, a processor JSON naming a state file not there yet) never
    passes; whole content passes on the second poll that finds it unchanged."""
    folder = tmp_path / "ckpt-7"
    folder.mkdir()
    ready = Readiness(tmp_path, require=())
    ckpt = Checkpoint(7, folder)
    model = (SHIPPED / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(model[:-1])
    assert ready.check(ckpt, None) == ready.check(ckpt, None) != None  # noqa: E711
    assert f"{len(model) - 1} of {len(model)} bytes" in str(ready.check(ckpt, None))
    (folder / "model.safetensors").write_bytes(model)
    (folder / "policy_preprocessor.json").write_bytes(
        (SHIPPED / "policy_preprocessor.json").read_bytes()
    )
    problems = content_problems(folder, ())
    assert problems == [
        "policy_preprocessor_step_3_normalizer_processor.safetensors missing "
        "(named by policy_preprocessor.json)"
    ]
    (folder / "policy_preprocessor.json").write_text('{"steps": [')  # mid-write
    assert "not whole JSON" in str(ready.check(ckpt, None))
    shutil.copy(SHIPPED / "policy_preprocessor.json", folder)
    shutil.copy(SHIPPED / "policy_preprocessor_step_3_normalizer_processor.safetensors", folder)
    assert "unchanged" in str(ready.check(ckpt, None))  # first sight of whole content
    assert ready.check(ckpt, None) is None  # unchanged one poll later
    os.utime(folder / "model.safetensors", ns=(1, 1))  # touched again: wait once more
    assert ready.check(ckpt, None) is not None and ready.check(ckpt, None) is None


def test_required_files(tmp_path: Path) -> None:
    shutil.copy(SHIPPED / "config.json", tmp_path)
    assert content_problems(tmp_path, ("config.json", "model.safetensors")) == [
        "model.safetensors missing"
    ]
    assert content_problems(tmp_path / "none", ()) == ["no files yet"]


def test_the_index_skips_a_torn_line_and_appends_after_it(tmp_path: Path) -> None:
    path = tmp_path / "watch.jsonl"
    index.append(path, {"step": 100, "overall": {}})
    with path.open("a") as f:
        f.write('{"step": 200, "ove')  # killed mid-write
    assert sorted(index.read(path)) == [100]
    index.append(path, {"step": 300, "overall": {}})
    assert sorted(index.read(path)) == [100, 300]
    assert path.read_text().splitlines()[-1] == '{"overall": {}, "step": 300}'


def _entry(step: int, successes: int, episodes: int = 4) -> dict:
    from pytest_hud.evaluation.proportions import wilson

    st = {"episodes": episodes, "successes": successes, "success_rate": successes / episodes,
          "wilson_95": list(wilson(successes, episodes)), "errors": 0}  # fmt: skip
    return {"step": step, "overall": st, "per_task": {"t/a": st}, "checkpoint": f"c{step}"}


def test_stop_conditions_and_final_step(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for step in (100, 200, 300):
        _save_like_lerobot(run, step)
    (run / "checkpoints" / "000300" / "pretrained_model" / "train_config.json").write_text(
        json.dumps({"steps": 300})
    )
    assert final_step(run / "checkpoints" / "000300" / "pretrained_model") == 300
    assert final_step(SHIPPED) == 2000  # the shipped run's lerobot-train --steps
    found = Pattern("checkpoints/{step}/pretrained_model").scan(run)

    watcher = Watcher(parse([str(run), "--until-step", "200", "suite"]))
    watcher.done = {100: _entry(100, 1)}
    assert watcher.stop_reason(found) is None  # 200 still to evaluate
    watcher.done[200] = _entry(200, 2)
    assert "until-step 200" in str(watcher.stop_reason(found))

    watcher = Watcher(parse([str(run), "suite"]))
    watcher.poll()  # the final step: train_config.json's steps
    assert watcher.final == 300
    watcher.done = {100: _entry(100, 1), 200: _entry(200, 3)}
    assert watcher.stop_reason(found) is None
    watcher.done[300] = _entry(300, 2)
    assert "final checkpoint (step 300)" in str(watcher.stop_reason(found))
    assert best(watcher.done) == 200


def test_a_restarted_watcher_starts_from_its_index(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _save_like_lerobot(run, 100)
    _link_last(run, 100)
    watch = parse([str(run), "suite", "-n", "2", "--final-step", "200"])
    assert watch.pytest_args == ["suite", "-n", "2"] and watch.final_step == 200
    index.append(watch.index_path, _entry(100, 1))
    watcher = Watcher(watch)
    ready, found = watcher.poll()
    assert sorted(found) == [100] and ready == []  # in the index: skipped


def test_options_the_watcher_owns_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(["run", "suite", "--hud-agent=zero"])
    assert exc.value.code == 2
    assert "--hud-agent=zero: the watcher sets these per checkpoint" in capsys.readouterr().err


def test_the_report_draws_every_task_and_names_the_best(tmp_path: Path) -> None:
    entries = {100: _entry(100, 1), 200: _entry(200, 4), 300: _entry(300, 3)}
    page = render(entries, tmp_path / "run", tmp_path / "out" / "report.html")
    assert "Best checkpoint so far: <b>step 200</b>" in page
    assert page.count("<circle") == 6  # overall and t/a at three steps
    assert page.count('<tr class="top">') == 1 and "4/4 [0.51, 1.00]" in page
