"""The plugin's options: declared once, read with ini fallbacks, validated at configure time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from pytest_hud._plugin.arm_specs import ARM_OPTIONS, read_ab_seed, read_agents
from pytest_hud._plugin.eval_options import EVALUATION_OPTIONS, EvaluationOptions
from pytest_hud._plugin.option_table import OptionTable, read_option
from pytest_hud._plugin.report_images import REPORT_OPTIONS, read_report_images
from pytest_hud.runtime.backends import BACKENDS, DEFAULT, RuntimeSpec, forms, parse
from pytest_hud.runtime.errors import PlacementError

__all__ = ["HudOptions", "OptionTable", "add_options", "addoption", "read_flag", "read_option"]

T = TypeVar("T")

#: The core's options; each feature declares its own (``OPTIONS`` in its module).
_OPTIONS: OptionTable = [
    (
        "--hud-runtime",
        f"where substrates run: {forms()} (ray: $RAY_ADDRESS, else a local cluster; "
        f"tcp/ws: a running env server) (default: {DEFAULT})",
        {},
    ),
    (
        "--hud-docker-base",
        "the image --hud-runtime=docker builds env images FROM (default: python:X.Y-slim, X.Y "
        "this Python's, if the engine has or can pull it, else one built once from this "
        "host's Python: python -m pytest_hud image base)",
        {},
    ),
    (
        "--hud-shared",
        "share one substrate per env among N concurrent rollouts "
        "(wraps the provider in Shared(width=N))",
        {"type": int},
    ),
    (
        "--hud-agent",
        "the policy: zero, random[:SEED], lerobot:PATH, pi05, openpi:HOST:PORT, "
        "openpi:ray:NAME (PolicyReplicas(..., name=NAME) on the Ray cluster), "
        "MODULE:FACTORY (default: random). Repeatable: every row runs under every agent "
        "(an A/B or a sweep; lerobot:GLOB takes a run's checkpoints by step), the first "
        "is the reference, the last the candidate",
        {"action": "append"},
    ),
    ("--hud-group", "rollouts per task row (repeats)", {"type": int}),
    (
        "--hud-concurrency",
        "rollouts in flight per process (lookahead over the items)",
        {"type": int},
    ),
    (
        "--hud-warm",
        "substrates booted ahead of the running rollouts, each fresh for one upcoming "
        "item: auto (--hud-concurrency of them on "
        + ", ".join(kind for kind, b in BACKENDS.items() if b.warm)
        + "; none elsewhere), off, or N (default: auto)",
        {},
    ),
    (
        "--hud-split",
        "batched rollouts whose sims step alone run in two halves (one half steps while "
        "the other's forward runs) or in one batch: auto (halves, switching to one batch "
        "where it measures that 5%% faster), halves or whole (default: auto)",
        {},
    ),
    ("--hud-max-steps", "stop each episode after N control ticks", {"type": int}),
    (
        "--hud-seed",
        "base seed; every repeat gets a seed derived from it, the row and the repeat index",
        {"type": int},
    ),
    (
        "--hud-record",
        "record every episode into a LeRobot v3 dataset at DIR (default $RECORD_DIR or ./data)",
        {"nargs": "?", "const": ""},
    ),
    ("--hud-results", "write per-rollout rows and aggregates to this JSON file", {}),
    (
        "--hud-min-success",
        "fail the session if the overall success rate is below P",
        {"type": float},
    ),
    (
        "--hud-gate",
        "how success gates compare: raw (the rate), wilson (the 95%% Wilson "
        "lower bound must clear the threshold), sequential (anytime-valid: each task "
        "stops its repeats once its verdict is known at --hud-alpha), or none (report only: "
        "gates are shown, episode failures do not fail the session, errors still do; for "
        "recording a baseline)",
        {"choices": ["raw", "wilson", "sequential", "none"]},
    ),
    (
        "--hud-baseline",
        "a previous results JSON: fail when success dropped by more than "
        "chance explains (two-proportion test)",
        {},
    ),
    (
        "--hud-baseline-strict",
        "fail (not just warn) when the baseline's agent, envs, group size or seeds differ",
        {"action": "store_true"},
    ),
    (
        "--hud-baseline-force",
        "compare with a baseline from an interrupted or incomplete run anyway",
        {"action": "store_true"},
    ),
    ("--hud-expect", "TOML/YAML of expected failures and skips per agent or checkpoint", {}),
    ("--hud-checkpoint", "the checkpoint name (selects --hud-expect tables; shown in reports)", {}),
    ("--hud-timeout", "seconds one rollout may take before it is an error", {"type": float}),
    *EVALUATION_OPTIONS,
    *REPORT_OPTIONS,
    *ARM_OPTIONS,
    (
        "--hud-allow-modules",
        "let task rows' module column import files outside the rootdir and the task "
        "file's folder (by default only those, and dotted module names)",
        {"action": "store_true"},
    ),
    (
        "--hud-no-auth",
        "let the servers this session starts (env servers, sims, bridges) admit anyone who "
        "can reach them, not only holders of the session's secret: for a trusted lab only",
        {"action": "store_true"},
    ),
]


def add_options(parser: pytest.Parser, table: OptionTable) -> None:
    """Declare ``table``'s options in pytest-hud's group, each with an ini of its name."""
    group = parser.getgroup("hud", "pytest-hud: policy evaluation")
    for flag, help_, kwargs in table:
        dest = flag[2:].replace("-", "_")
        group.addoption(flag, dest=dest, default=None, help=help_, **kwargs)
        text = help_.replace("%%", "%")
        if kwargs.get("action") == "store_true":  # its ini: true/false, yes/no, 1/0
            parser.addini(dest, help=text, type="bool", default=None)
        else:
            parser.addini(dest, help=text, default=None)


def addoption(parser: pytest.Parser) -> None:
    add_options(parser, _OPTIONS)


def read_flag(config: pytest.Config, name: str) -> bool:
    """A yes/no option ``name`` (a dest, ``hud_x_y``): given on the command line, else its
    ini (true/false, yes/no, 1/0: pytest refuses anything else), else False."""
    return bool(config.getoption(name) or config.getini(name))


def _warm(raw: str | None) -> int | None:
    """``--hud-warm``: auto (None), off (0) or a count."""
    text = str(raw).strip().lower() if raw is not None else "auto"
    if text in ("auto", ""):
        return None
    if text in ("off", "0", "no", "false"):
        return 0
    if text.isdigit():
        return int(text)
    raise pytest.UsageError(f"--hud-warm is auto, off or a count >= 0, got {raw!r}")


@dataclass
class HudOptions(EvaluationOptions):
    runtime: str = DEFAULT
    docker_base: str | None = None
    shared: int | None = None
    agent: str = "random"
    group: int = 1
    concurrency: int = 1
    split: str = "auto"
    warm: int | None = None  # None: auto (runtime/warm.py: pool_size), 0: off
    max_steps: int | None = None
    seed: int | None = None
    record: str | None = None
    results: Path | None = None
    min_success: float | None = None
    gate: str = "raw"
    baseline: Path | None = None
    baseline_strict: bool = False
    baseline_force: bool = False
    expect: Path | None = None
    checkpoint: str | None = None
    timeout: float = 900.0
    allow_modules: bool = False
    no_auth: bool = False
    report_images: list[Path] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)  # every --hud-agent; agent is the first
    ab_seed: int | None = None  # several agents: the run order's seed
    ab_gate: bool = False
    ab_metric: str = "success"  # the first of ab_metrics: the live test's
    ab_metrics: list[str] = field(default_factory=lambda: ["success"])

    @property
    def runtime_spec(self) -> RuntimeSpec:
        """``--hud-runtime`` parsed (runtime/backends.py); an unknown kind is a usage error."""
        try:
            return parse(self.runtime, self.docker_base)
        except PlacementError as exc:
            raise pytest.UsageError(str(exc)) from None

    @classmethod
    def from_config(cls, config: pytest.Config) -> HudOptions:
        o = cls()

        def store(
            names: tuple[str, ...], kind: Callable[[str], T], as_: Callable[[T], object]
        ) -> None:
            """Each option of ``names`` that is set: read as ``kind``, stored ``as_``."""
            for name in names:
                value = read_option(config, f"hud_{name}", kind)
                if value is not None:
                    setattr(o, name, as_(value))

        store(("runtime", "docker_base", "gate", "checkpoint", "record", "split"), str, str)
        store(("shared", "group", "concurrency", "max_steps", "seed"), int, int)
        store(("min_success", "timeout"), float, float)
        store(("results", "baseline", "expect"), str, Path)
        o.read_evaluation(config)
        o.report_images = read_report_images(config)
        o.warm = _warm(read_option(config, "hud_warm", str))
        metrics = read_option(config, "hud_ab_metric", str)
        if metrics:
            o.ab_metrics = [m.strip() for m in metrics.split(",") if m.strip()]
            o.ab_metric = o.ab_metrics[0] if o.ab_metrics else ""
        o.agents = [spec.text for spec in read_agents(config)]
        o.agent = o.agents[0]
        if len(o.agents) > 1:
            o.ab_seed = read_ab_seed(config)
        for name in ("baseline_strict", "baseline_force", "ab_gate", "allow_modules", "no_auth"):
            setattr(o, name, read_flag(config, f"hud_{name}"))
        o.validate()
        return o

    def validate(self) -> None:
        def positive(name: str, value: int | None) -> None:
            if value is not None and value < 1:
                raise pytest.UsageError(f"--hud-{name.replace('_', '-')} must be >= 1, got {value}")

        for name in ("shared", "group", "concurrency", "max_steps"):
            positive(name, getattr(self, name))
        if self.min_success is not None and not 0.0 <= self.min_success <= 1.0:
            raise pytest.UsageError(
                f"--hud-min-success is a rate between 0 and 1, got {self.min_success}"
            )
        if self.gate not in ("raw", "wilson", "sequential", "none"):
            raise pytest.UsageError(
                f"--hud-gate is raw, wilson, sequential or none, got {self.gate!r}"
            )
        from pytest_hud.robot.agent.split import WAYS  # no torch: a leaf module

        if self.split not in WAYS:
            raise pytest.UsageError(f"--hud-split is auto, halves or whole, got {self.split!r}")
        self.validate_evaluation()
        if self.shared is not None and self.concurrency > self.shared:
            raise pytest.UsageError(
                f"--hud-concurrency={self.concurrency} exceeds --hud-shared={self.shared}: a "
                f"shared substrate takes at most {self.shared} rollouts at once, so the "
                f"extra {self.concurrency - self.shared} would only wait; lower the "
                "concurrency or raise the width"
            )
        for name in ("baseline", "expect"):
            path = getattr(self, name)
            if path is not None and not path.exists():
                raise pytest.UsageError(f"--hud-{name}: {path} does not exist")
        spec = self.runtime_spec
        if self.docker_base is not None and (not spec.backend.builds or spec.arg):
            builders = ", ".join(k for k, b in BACKENDS.items() if b.builds)
            raise pytest.UsageError(
                f"--hud-docker-base={self.docker_base} is the base of the images "
                f"--hud-runtime={builders} builds, but the runtime is {self.runtime!r}; fix: "
                f"pass --hud-runtime={builders}, or drop --hud-docker-base"
            )
        if self.timeout <= 0:
            raise pytest.UsageError("--hud-timeout must be positive")
        _validate_arms(self)


#: what --hud-ab-metric may name
AB_METRICS = ("success", "score", "steps")


def _validate_arms(options: HudOptions) -> None:
    """What several agents cannot be combined with (one usage error naming the fix)."""
    unknown = [m for m in options.ab_metrics if m not in AB_METRICS]
    if unknown or not options.ab_metrics or len(set(options.ab_metrics)) < len(options.ab_metrics):
        raise pytest.UsageError(
            f"--hud-ab-metric: expected distinct metrics among {', '.join(AB_METRICS)} "
            f"(comma-separated), got {','.join(options.ab_metrics) or 'none'}"
        )
    if len(options.agents) < 2:
        if options.ab_gate:
            raise pytest.UsageError(
                "--hud-ab-gate compares agents: expected --hud-agent at least twice "
                f"(reference first, candidate last), got {options.agents}"
            )
        return
    if "steps" in options.ab_metrics and not options.max_steps:
        raise pytest.UsageError(
            "--hud-ab-metric=steps compares time to success, which needs a bound: expected "
            "--hud-max-steps=N (a failed episode counts as N steps), got none"
        )
    conflicts = {
        "checkpoint": "each arm is named by its spec, or by its checkpoints/NNNNNN step",
        "compare": "the arms are compared with each other in this session",
        "baseline": "the first --hud-agent is the reference the others are compared with",
    }
    for name, why in conflicts.items():
        if getattr(options, name) not in (None, [], False):
            raise pytest.UsageError(
                f"--hud-{name} is for one agent, got {len(options.agents)} --hud-agent "
                f"({', '.join(options.agents)}); {why}: drop --hud-{name}"
            )
