"""``--hud-runtime=docker`` with no image, against the real Docker engine and real pip:
Environment(requires=, apt=), the image spec (which modules, where, which tag), the
``image build|ls|rm`` command (a bogus requirement named with pip's log tail), and the
example suite (two env modules, three envs) giving the same per-row results under
docker as under the local runtime; and the host variables both docker forms (this one
and ``docker:IMAGE``) forward into containers. Skips only when no engine is reachable
(fails instead under PYTEST_HUD_REQUIRE_ALL=1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from docker_helpers import base_image, engine
from needs import require

from pytest_hud import Environment
from pytest_hud.runtime.docker import auto as docker_auto
from pytest_hud.runtime.docker.auto import REPOSITORY, image_spec
from pytest_hud.runtime.docker.engine import RENDER_VARS, _forwarded_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.docker


def test_environment_declares_requires_and_apt() -> None:
    env = Environment("auto-decl", requires=["metaworld==3.1.1"], apt=["libegl1"])
    assert env.requires == ("metaworld==3.1.1",) and env.apt == ("libegl1",)
    assert Environment("auto-plain").requires == ()
    with pytest.raises(TypeError, match="requires=.*list of non-empty strings"):
        Environment("auto-bad", requires="metaworld")  # a string, not a list


def _module(path: Path, name: str, requires: list[str], apt: list[str]) -> Path:
    path.write_text(
        "from pytest_hud import Environment\n"
        f"env = Environment({name!r}, requires={requires!r}, apt={apt!r})\n"
    )
    return path


def test_image_spec_gathers_modules_requirements_and_hashes_sources(tmp_path: Path) -> None:
    from pytest_hud.plumbing.loader import load_module

    a = _module(tmp_path / "a_env.py", "auto-a", ["packaging"], ["libegl1"])
    b = _module(tmp_path / "b_env.py", "auto-b", ["packaging", "six"], [])
    load_module(a), load_module(b)
    spec = image_spec([a, b])
    assert spec.tag.startswith(f"{REPOSITORY}:")
    assert spec.requires == ("packaging", "six") and spec.apt == ("libegl1",)
    assert sorted(spec.modules.values()) == ["/app/envs/0/a_env.py", "/app/envs/1/b_env.py"]
    assert image_spec([b, a]).tag == spec.tag  # order does not matter
    b.write_text(b.read_text() + "# changed\n")
    assert image_spec([a, b]).tag != spec.tag  # a module's source is part of the key

    import pytest_hud.suites.metaworld as metaworld

    shipped = image_spec([metaworld.__file__])
    assert list(shipped.modules.values()) == ["pytest_hud.suites.metaworld"]  # by name
    assert shipped.copies == {} and "metaworld==3.1.1" in shipped.requires
    assert "libosmesa6" in shipped.apt


def test_an_auto_built_container_publishes_one_sim_port_per_robot(tmp_path: Path) -> None:
    """Each published port is a docker-proxy process (DockerRuntime's default of 8 sim
    ports made 9 per container); an auto-built image's containers publish what the env
    module's robots need, at least one (the example suite, run under docker in this file,
    shows the ports suffice)."""
    from pytest_hud.plumbing.loader import load_module

    two = tmp_path / "two_robots_env.py"
    two.write_text(
        "from pytest_hud import Environment\n"
        "arm = Environment('ports-arm')\n"
        "arm.gym('CartPole-v1', name='left')\n"
        "arm.gym('CartPole-v1', name='right')\n"
        "cam = Environment('ports-cam')\n"
        "cam.gym('Pendulum-v1')\n"
    )
    none = tmp_path / "no_robot_env.py"
    none.write_text("from pytest_hud import Environment\nenv = Environment('ports-none')\n")
    load_module(two), load_module(none)
    assert docker_auto.sim_ports(str(two)) == 3
    assert docker_auto.sim_ports(str(none)) == 1


def test_render_backend_and_hud_variables_reach_containers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a container of either docker form gets from the host's environment (the
    LIBERO suite's tests show a bogus MUJOCO_GL failing inside a real container), and in
    which order: forwarded, then the runtime's ``env``, then the row's."""
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setenv("PYOPENGL_PLATFORM", "osmesa")
    monkeypatch.setenv("PYTEST_HUD_METAWORLD_CAMERAS", "corner2")
    monkeypatch.setenv("PYTEST_HUD_MODULE", "host/only.py")
    monkeypatch.setenv("PYTEST_HUD_CACHE", "/host/cache")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/host/lib")
    env = _forwarded_env()
    assert env["MUJOCO_GL"] == "osmesa" and env["PYOPENGL_PLATFORM"] == "osmesa"
    assert env["PYTEST_HUD_METAWORLD_CAMERAS"] == "corner2"
    assert not {"PYTEST_HUD_MODULE", "PYTEST_HUD_CACHE", "LD_LIBRARY_PATH"} & set(env)
    assert docker_auto.RENDER_VARS is RENDER_VARS  # one definition, importable from both

    from pytest_hud import DockerRuntime, Task
    from pytest_hud.runtime.placement import provider_for

    image_form = provider_for("docker:some-image")
    assert isinstance(image_form, DockerRuntime) and image_form.forward_env
    row = Task("e", "t", runtime_config={"env": {"PYOPENGL_PLATFORM": "egl"}})
    runtime = DockerRuntime("img", env={"MUJOCO_GL": "glfw"}, forward_env=True)
    created = runtime.create_kwargs(row, "img", "m")["environment"]
    assert created["MUJOCO_GL"] == "glfw" and created["PYOPENGL_PLATFORM"] == "egl"
    assert created["PYTEST_HUD_METAWORLD_CAMERAS"] == "corner2"
    plain = DockerRuntime("img").create_kwargs(row, "img", "m")["environment"]
    assert "MUJOCO_GL" not in plain  # a Python-built DockerRuntime forwards nothing


@pytest.mark.timeout(900)
def test_clashing_suites_get_one_image_each(tmp_path: Path, monkeypatch) -> None:
    """MetaWorld 3.1.1 pins mujoco==3.3.0, LIBERO mujoco==3.17.0: pip (a real dry run,
    metadata only) cannot resolve them together, so a session spanning both gets one
    image per module, each the image a single-suite session builds (so it is reused).
    Modules whose requirements resolve together keep sharing one image."""
    import pytest_hud.suites.libero as libero
    import pytest_hud.suites.metaworld as metaworld
    from pytest_hud.runtime.docker.groups import image_groups

    monkeypatch.setenv("PYTEST_HUD_CACHE", str(tmp_path))  # a fresh verdict: pip is asked
    files = [metaworld.__file__, libero.__file__]
    specs = docker_auto.image_specs(files)
    assert [list(s.modules.values()) for s in specs] == [
        ["pytest_hud.suites.libero"],
        ["pytest_hud.suites.metaworld"],
    ]
    assert [s.tag for s in specs] == [
        image_spec([libero.__file__]).tag,
        image_spec([metaworld.__file__]).tag,
    ]
    (verdict,) = (tmp_path / "resolve").iterdir()
    reason = json.loads(verdict.read_text())["conflict"]
    assert "metaworld==3.1.1" in reason and "mujoco==3.17.0" in reason
    assert docker_auto.image_specs(files) == specs  # the cached verdict, same answer
    groups, why = image_groups({"a.py": ["six"], "b.py": ["packaging"], "c.py": []}, [], tmp_path)
    assert (groups, why) == ([["a.py", "b.py", "c.py"]], None)


@pytest.fixture(scope="module")
def client():
    found = engine()
    require(found, "a Docker engine", "start one with .ci/docker-up (or scripts/setup --docker)")
    base_image(found)
    yield found
    found.close()


def _python(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``env`` (default: this one) with this checkout importable
    (bounded: image builds are slow)."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=3600,
        check=False,
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return _python("-m", "pytest_hud", "image", *args)


@pytest.mark.timeout(900)
def test_image_build_with_a_bogus_requirement_names_it(client, tmp_path: Path) -> None:
    bogus = "pytest-hud-no-such-package-zz9==0.0.1"
    module = _module(tmp_path / "bogus_env.py", "auto-bogus", [bogus], [])
    proc = _cli("build", str(module))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"failed on {bogus}" in proc.stderr
    assert "No matching distribution" in proc.stderr  # pip's own log tail


def test_image_build_with_a_bogus_apt_package_names_it(client, tmp_path: Path) -> None:
    module = _module(tmp_path / "bogus_apt.py", "auto-bogus-apt", [], ["no-such-deb-zz9"])
    proc = _cli("build", str(module))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "apt package 'no-such-deb-zz9'" in proc.stderr


def _rows(xml: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        verdict = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                verdict = child.tag
        out[f"{case.get('classname')}::{case.get('name')}"] = verdict
    return out


@pytest.mark.timeout(3600)  # cold: pip + apt + two image layers, then two runs
def test_example_suite_under_docker_matches_local_row_by_row(client, tmp_path: Path) -> None:
    """The README's command with no image flag: one image for pendulum.py + pusht.py
    (pendulum, cartpole, pusht rows), built by `image build` first (progress, cache miss
    or hit), then ls shows it, and the per-row verdicts equal the local runtime's. The
    zero agent, because the default (unseeded random) agent's verdicts differ between
    two local runs too."""
    build = _cli("build", str(EXAMPLES / "tests" / "conftest.py"))
    assert build.returncode == 0, build.stderr
    tag = build.stdout.strip().splitlines()[-1]
    assert tag.startswith(f"{REPOSITORY}:") and "cache " in build.stderr
    again = _cli("build", str(EXAMPLES / "tests" / "conftest.py"))
    assert f"cache hit: {tag} is up to date" in again.stderr
    listed = _cli("ls")
    assert tag in listed.stdout and "pusht.py" in listed.stdout

    results = {}
    for runtime in ("docker", "local"):
        xml = tmp_path / f"{runtime}.xml"
        args = ["examples/tests", f"--hud-runtime={runtime}", "--hud-agent=zero", "-n", "2"]
        proc = _python("-m", "pytest", *args, "-q", "-p", "no:cacheprovider", f"--junitxml={xml}")
        assert xml.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
        results[runtime] = _rows(xml)
        assert "error" not in results[runtime].values(), proc.stdout[-3000:]
    assert len(results["docker"]) == 13
    assert results["docker"] == results["local"], json.dumps(results, indent=1)
    assert docker_auto.REPOSITORY in tag


@pytest.mark.timeout(3600)  # cold: metaworld + Mesa image, ~6 min here
def test_metaworld_mt10_under_docker_with_the_expert(client, tmp_path: Path) -> None:
    """The card's shape: all ten MT10 tasks x one goal each (the full 10 x 5 is the same
    rows with more goals: bench/suites.py), in the image built from the suite's
    declarations (metaworld + Mesa via requires/apt), -n 2, ``--hud-agent=metaworld-expert``
    (the built-in agent's registered name), gated at 90%."""
    from pytest_hud.suites.metaworld.tasks import MODULE, mt10

    rows = mt10(1)
    assert len({t.id for t in rows}) == len(rows) == 10
    tasks = tmp_path / "mt10.jsonl"
    tasks.write_text("".join(json.dumps({**t.to_row(), "module": MODULE}) + "\n" for t in rows))
    results = tmp_path / "results.json"
    args = [str(tasks), "--hud-runtime=docker", "-n", "2", f"--hud-results={results}"]
    args += ["--hud-agent=metaworld-expert", "--hud-min-success=0.9", "--rootdir", str(tmp_path)]
    proc = _python("-m", "pytest", *args, "-q", "-p", "no:cacheprovider", cwd=tmp_path)
    assert results.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    overall = json.loads(results.read_text())["overall"]
    assert overall["episodes"] == 10 and overall["errors"] == 0, proc.stdout[-3000:]
    assert overall["success_rate"] >= 0.9, proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:]  # the 90% gate passed


#: An env module reporting, as its prompt, what its container's environment holds.
PROBE_ENV = """
import json, os
from pytest_hud import Environment

env = Environment("env-probe")
pole = env.gym("CartPole-v1")
SEEN = ("MUJOCO_GL", "PYTEST_HUD_PROBE_VAR", "PYTEST_HUD_CACHE", "HUD_PROBE_UNFORWARDED")


@env.template()
async def seen(n: int = 0):
    ep = await pole.reset(seed=n)
    prompt = json.dumps({k: os.environ.get(k) for k in SEEN})
    yield {"prompt": prompt, "robot": {"token": ep["token"]}}
    yield {"score": 1.0, "success": True}
"""


@pytest.mark.timeout(900)  # the image builds on a cold cache
def test_docker_image_form_forwards_the_host_variables(client, tmp_path: Path) -> None:
    """``--hud-runtime=docker:IMAGE`` (an image the user built) gives its containers the
    host's render backend and ``PYTEST_HUD_*`` variables, as the auto-built form does, so
    ``MUJOCO_GL=osmesa`` selects the same backend in the container as on the host; a
    row's ``runtime_config.env`` wins; host-only and unrelated variables stay out."""
    from pytest_hud.runtime.docker import build_image

    module = tmp_path / "probe_env.py"
    module.write_text(PROBE_ENV)
    tag = build_image(
        "pytest-hud-env-probe:test", module="probe_env.py", extra_files={"probe_env.py": module}
    )
    rows = [
        {"env": "env-probe", "id": "seen", "args": {"n": 0}},
        {
            "env": "env-probe",
            "id": "seen",
            "args": {"n": 1},
            "runtime_config": {"env": {"MUJOCO_GL": "egl"}},
        },
    ]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_HUD_")}
    env.update(MUJOCO_GL="osmesa", PYTEST_HUD_PROBE_VAR="from-host")
    env.update(PYTEST_HUD_CACHE=str(tmp_path / "cache"), HUD_PROBE_UNFORWARDED="host-only")
    args = ["rows.jsonl", f"--hud-runtime=docker:{tag}", "--hud-agent=zero", "-q"]
    args += ["-p", "no:cacheprovider", "--hud-results=results.json", "--rootdir", str(tmp_path)]
    proc = _python("-m", "pytest", *args, cwd=tmp_path, env=env)
    results = tmp_path / "results.json"
    assert results.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    seen = {
        r["key"]: json.loads(r["prompt"]) if r["prompt"] else r["error"]
        for r in json.loads(results.read_text())["rollouts"]
    }
    expected = {"PYTEST_HUD_PROBE_VAR": "from-host", "PYTEST_HUD_CACHE": None}
    expected["HUD_PROBE_UNFORWARDED"] = None
    assert sorted(seen.values(), key=str) == [
        {"MUJOCO_GL": "egl", **expected},  # the row's runtime_config.env
        {"MUJOCO_GL": "osmesa", **expected},  # the host's
    ], (seen, proc.stdout[-3000:])
