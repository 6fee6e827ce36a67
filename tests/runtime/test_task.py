"""Task rows and tasksets: slugs, validation, loading and writing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hud import RuntimeConfig, Task, Taskset
from pytest_hud.runtime import TaskError
from pytest_hud.runtime.task import without_args_hash

ROOT = Path(__file__).resolve().parents[2]


def test_slug_is_stable_and_depends_on_args_only() -> None:
    a = Task("pendulum", "swing_up", {"seed": 1, "g": 9.8})
    b = Task("pendulum", "swing_up", {"g": 9.8, "seed": 1})
    c = Task("pendulum", "swing_up", {"seed": 2, "g": 9.8})
    assert a.slug == b.slug and a == b and hash(a) == hash(b)
    assert a.slug != c.slug
    assert a.slug.startswith("swing_up-") and len(a.slug) == len("swing_up-") + 8
    assert Task("pendulum", "swing_up").slug == "swing_up"
    assert a.key == f"pendulum/{a.slug}"
    # read back from ids and reports: the slug (or key) without its args' hash
    assert without_args_hash(a.slug) == "swing_up" == without_args_hash("swing_up")
    assert without_args_hash(a.key) == "pendulum/swing_up"
    # the hash is fixed across processes and versions: it is part of test ids
    assert (
        Task("e", "t", {"seed": 0}).slug
        == "t-" + __import__("hashlib").sha256(b'{"seed":0}').hexdigest()[:8]
    )


def test_runtime_config_and_metadata_columns() -> None:
    t = Task.from_row(
        {
            "env": "e",
            "id": "t",
            "args": {"seed": 1},
            "suite": "libero_10",
            "runtime_config": {"image": "img:1", "gpu": "A10G", "env": {"X": 1}},
        }
    )
    assert t.metadata == {"suite": "libero_10"}
    assert t.runtime_config == RuntimeConfig(image="img:1", gpu="A10G", env=(("X", "1"),))
    back = Task.from_row(t.to_row())
    assert back == t and back.metadata == t.metadata and back.runtime_config == t.runtime_config


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ({"id": "t"}, "row 1: missing field 'env'"),
        ({"env": "e"}, "row 1: missing field 'id'"),
        ({"env": "", "id": "t"}, "'env' must be a non-empty string"),
        ({"env": "e", "id": "t", "args": {"x": object()}}, "'args' is not JSON-serializable"),
        ({"env": "e", "id": "t", "args": [1]}, "'args' must be a mapping"),
        ({"env": "e", "id": "t", "runtime_config": {"gpus": 2}}, "unknown keys \\['gpus'\\]"),
        ([1, 2], "a task row is a JSON object"),
    ],
)
def test_bad_rows_name_the_row_and_field(row, match) -> None:
    with pytest.raises(TaskError, match=match):
        Taskset([row])


def test_duplicate_rows_are_refused_with_both_row_numbers() -> None:
    rows = [
        {"env": "e", "id": "t", "args": {"seed": 1}},
        {"env": "e", "id": "u"},
        {"env": "e", "id": "t", "args": {"seed": 1}},
    ]
    with pytest.raises(TaskError, match=r"row 3: duplicate task 'e/t-.*as row 1"):
        Taskset(rows)


def test_json_and_jsonl_round_trip(tmp_path: Path) -> None:
    ts = Taskset([Task("e", "t", {"seed": s}, metadata={"suite": "a"}) for s in range(3)])
    for name in ("rows.json", "rows.jsonl"):
        path = ts.write(tmp_path / name)
        back = Taskset.load(path)
        assert list(back) == list(ts) and back.source == str(path)
        assert [t.metadata for t in back] == [{"suite": "a"}] * 3


def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"env": "e", "id": "a"}\n\n# a comment\n{"env": "e", "id": }\n')
    with pytest.raises(TaskError, match=r"tasks\.jsonl:4: not a JSON object"):
        Taskset.load(path)
    path.write_text('{"env": "e", "id": "a"}\n{"env": "e"}\n')
    with pytest.raises(TaskError, match=r"tasks\.jsonl:2: missing field 'id'"):
        Taskset.load(path)


def test_load_from_a_python_module_lists_the_tasks_its_envs_declare() -> None:
    ts = Taskset.load(ROOT / "examples" / "envs" / "pendulum.py")
    assert ts.envs == ["pendulum", "cartpole"]
    assert [t.args["seed"] for t in ts if t.env == "pendulum"] == [0, 1, 2]
    assert ts.source.endswith("pendulum.py")


def test_template_task_checks_args_against_its_signature() -> None:
    from pytest_hud import Environment

    env = Environment("sig")

    @env.template()
    async def pick(obj: str, seed: int = 0):
        yield {"prompt": obj}
        yield {"score": 1}

    assert pick.task(obj="cube").args == {"obj": "cube"}
    with pytest.raises(TaskError, match="unexpected keyword argument 'color'.*obj, seed"):
        pick.task(obj="cube", color="red")
    with pytest.raises(TaskError, match="missing a required argument: 'obj'"):
        pick.task()
    assert [t.args for t in env.tasks] == [{"obj": "cube"}]
    with pytest.raises(TypeError, match="async generator"):
        env.template()(lambda: None)


def test_json_file_with_tasks_key(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"tasks": [{"env": "e", "id": "t"}]}))
    assert [t.key for t in Taskset.load(path)] == ["e/t"]
    path.write_text("[1, ")
    with pytest.raises(TaskError, match=r"t\.json:1: invalid JSON"):
        Taskset.load(path)


@pytest.mark.anyio
async def test_run_refuses_an_agent_spec_string_before_any_rollout() -> None:
    """A new user's trial: run(tasks, "random") started every rollout and each ERRORed with
    a TypeError inside the agent; the spec is now refused at once, naming the fix."""
    from pytest_hud import run

    with pytest.raises(TypeError, match=r"agent object .*got 'random'.*load_agent\(spec\)"):
        await run([Task("counter", "cleanup_probe")], "random")  # type: ignore[arg-type]
