"""The core's options, each declared once as a field of :class:`HudOptions` (flag, help, type,
default, check); read at configure into one frozen object holding parsed specs (the agents, the
runtime), which features may change only by returning a changed copy from their ``configure``.
Each feature's own options live with the feature (``pytest_hud/features/``).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_hud._plugin.arms import read_agents
from pytest_hud._plugin.internals import from_controller
from pytest_hud._plugin.report_images import read_report_images
from pytest_hud._plugin.settings import add_options, option, path_option, read_settings
from pytest_hud.errors import PlacementError
from pytest_hud.robot.agent.registry import DEFAULT_AGENT, AgentSpec
from pytest_hud.robot.agent.split import WAYS
from pytest_hud.runtime.backends import BACKENDS, DEFAULT, RuntimeSpec, forms, parse

__all__ = ["HANDED_SEED", "HudOptions", "addoption"]

#: the workerinput key of the arms' order seed (every worker shuffles the same order)
HANDED_SEED = "hud_ab_seed"


def _at_least_one(value: int) -> str | None:
    return None if value >= 1 else f"must be >= 1, got {value}"


def _rate(value: float) -> str | None:
    return None if 0.0 <= value <= 1.0 else f"is a rate between 0 and 1, got {value}"


def _warm(text: str) -> int | None:
    """``--hud-warm``: auto (None), off (0) or a count."""
    low = text.strip().lower()
    if low in ("auto", ""):
        return None
    if low in ("off", "0", "no", "false"):
        return 0
    if low.isdigit():
        return int(low)
    raise ValueError(f"is auto, off or a count >= 0, got {text!r}")


def _read_runtime(config: pytest.Config) -> RuntimeSpec | None:
    """``--hud-runtime`` (with ``--hud-docker-base``) parsed once; an unknown kind is a
    usage error naming every valid form."""
    raw = config.getoption("hud_runtime", None) or config.getini("hud_runtime") or None
    base = config.getoption("hud_docker_base", None) or config.getini("hud_docker_base") or None
    try:
        return parse(str(raw) if raw else DEFAULT, str(base) if base else None)
    except PlacementError as exc:
        raise pytest.UsageError(str(exc)) from None


def _read_agents(config: pytest.Config) -> tuple[AgentSpec, ...]:
    return tuple(read_agents(config))


def _read_seed(config: pytest.Config) -> int | None:
    """``--hud-ab-seed`` (else the ini's, else the controller's: every worker the same)."""
    given = config.getoption("hud_ab_seed", None)
    if given is None:
        ini = config.getini("hud_ab_seed")
        if ini not in (None, "", []):
            try:
                given = int(str(ini))
            except ValueError:
                raise pytest.UsageError(f"ini option hud_ab_seed = {ini!r} is not an int") from None
    if given is None:
        given = from_controller(config, HANDED_SEED)
    return None if given is None else int(given)


@dataclass(frozen=True)
class HudOptions:
    """The session's core settings, read once at configure (see the module docs)."""

    runtime: RuntimeSpec = option(
        "--hud-runtime",
        f"where substrates run: {forms()} (ray: $RAY_ADDRESS, else a local cluster; "
        f"tcp/ws: a running env server) (default: {DEFAULT})",
        default=parse(DEFAULT),
        read=_read_runtime,
    )
    docker_base: str | None = option(
        "--hud-docker-base",
        "the image --hud-runtime=docker builds env images FROM (default: python:X.Y-slim, X.Y "
        "this Python's, if the engine has or can pull it, else one built once from this "
        "host's Python: python -m pytest_hud image base)",
    )
    shared: int | None = option(
        "--hud-shared",
        "share one substrate per env among N concurrent rollouts "
        "(wraps the provider in Shared(width=N))",
        parse=int,
        check=_at_least_one,
    )
    agents: tuple[AgentSpec, ...] = option(
        "--hud-agent",
        "the policy: zero, random[:SEED], lerobot:PATH, pi05, openpi:HOST:PORT, "
        "openpi:ray:NAME (PolicyReplicas(..., name=NAME) on the Ray cluster), "
        "MODULE:FACTORY (default: random). Repeatable: every row runs under every agent "
        "(an A/B or a sweep; lerobot:GLOB takes a run's checkpoints by step), the first "
        "is the reference, the last the candidate",
        kind="list",
        default=(DEFAULT_AGENT,),
        read=_read_agents,
    )
    group: int = option(
        "--hud-group", "rollouts per task row (repeats)", default=1, parse=int, check=_at_least_one
    )
    concurrency: int = option(
        "--hud-concurrency",
        "rollouts in flight per process (lookahead over the items)",
        default=1,
        parse=int,
        check=_at_least_one,
    )
    warm: int | None = option(
        "--hud-warm",
        "substrates booted ahead of the running rollouts, each fresh for one upcoming "
        "item: auto (--hud-concurrency of them on "
        + ", ".join(kind for kind, b in BACKENDS.items() if b.warm)
        + "; none elsewhere), off, or N (default: auto)",
        parse=_warm,
    )
    split: str = option(
        "--hud-split",
        "batched rollouts whose sims step alone run in two halves (one half steps while "
        "the other's forward runs) or in one batch: auto (halves, switching to one batch "
        "where it measures that 5%% faster), halves or whole (default: auto)",
        default="auto",
        check=lambda v: None if v in WAYS else f"is auto, halves or whole, got {v!r}",
    )
    max_steps: int | None = option(
        "--hud-max-steps", "stop each episode after N control ticks", parse=int, check=_at_least_one
    )
    seed: int | None = option(
        "--hud-seed",
        "base seed; every repeat gets a seed derived from it, the row and the repeat index",
        parse=int,
    )
    ab_seed: int | None = option(
        "--hud-ab-seed",
        "with several --hud-agent: the seed of the shuffled, interleaved run order of the "
        "arms' items (default: a random one, printed in the header and stored in the "
        "results JSON)",
        parse=int,
        read=_read_seed,
    )
    results: Path | None = path_option(
        "--hud-results", "write per-rollout rows and aggregates to this JSON file"
    )
    min_success: float | None = option(
        "--hud-min-success",
        "fail the session if the overall success rate is below P",
        parse=float,
        check=_rate,
    )
    gate: str = option(
        "--hud-gate",
        "how success gates compare: raw (the rate), wilson (the 95%% Wilson "
        "lower bound must clear the threshold), sequential (anytime-valid: each task "
        "stops its repeats once its verdict is known at --hud-alpha), or none (report only: "
        "gates are shown, episode failures do not fail the session, errors still do; for "
        "recording a baseline)",
        default="raw",
        choices=("raw", "wilson", "sequential", "none"),
        check=lambda v: (
            None
            if v in ("raw", "wilson", "sequential", "none")
            else f"is raw, wilson, sequential or none, got {v!r}"
        ),
    )
    alpha: float = option(
        "--hud-alpha",
        "error level of --hud-gate=sequential decisions and --hud-compare verdicts (default 0.05)",
        default=0.05,
        parse=float,
        check=lambda v: None if 0.0 < v < 1.0 else f"is a level in (0, 1), got {v}",
    )
    min_coverage: float = option(
        "--hud-min-coverage",
        "no gate or A/B verdict when fewer than this share of the attempted episodes were "
        "scored (errors are not scored; default 0.95): the gate fails naming the errored rows",
        default=0.95,
        parse=float,
        check=lambda v: None if 0.0 <= v <= 1.0 else f"is a share of episodes in [0, 1], got {v}",
    )
    baseline: Path | None = path_option(
        "--hud-baseline",
        "a previous results JSON: fail when success dropped by more than "
        "chance explains (two-proportion test)",
        exists="pass the results JSON of an earlier run",
    )
    baseline_strict: bool = option(
        "--hud-baseline-strict",
        "fail (not just warn) when the baseline's agent, envs, group size or seeds differ",
        default=False,
        kind="flag",
    )
    baseline_force: bool = option(
        "--hud-baseline-force",
        "compare with a baseline from an interrupted or incomplete run anyway",
        default=False,
        kind="flag",
    )
    expect: Path | None = path_option(
        "--hud-expect",
        "TOML/YAML of expected failures and skips per agent or checkpoint",
        exists="pass the expectations file (TOML or YAML)",
    )
    checkpoint: str | None = option(
        "--hud-checkpoint", "the checkpoint name (selects --hud-expect tables; shown in reports)"
    )
    timeout: float = option(
        "--hud-timeout",
        "seconds one rollout may take before it is an error",
        default=900.0,
        parse=float,
        check=lambda v: None if v > 0 else "must be positive",
    )
    report_images: tuple[Path, ...] = option(
        "--hud-report-image",
        "an image (PNG, GIF, JPEG or SVG) to show and link in the html report's summary, "
        "e.g. success per checkpoint from 'python -m pytest_hud compare ... --plot' "
        "(repeatable; ini: paths separated by whitespace)",
        kind="list",
        default=(),
        read=read_report_images,
    )
    allow_modules: bool = option(
        "--hud-allow-modules",
        "let task rows' module column import files outside the rootdir and the task "
        "file's folder (by default only those, and dotted module names)",
        default=False,
        kind="flag",
    )
    no_auth: bool = option(
        "--hud-no-auth",
        "let the servers this session starts (env servers, sims, bridges) admit anyone who "
        "can reach them, not only holders of the session's secret: for a trusted lab only",
        default=False,
        kind="flag",
    )
    #: substrates boot in this process (False: each rollout runs, and boots, elsewhere)
    boots_here: bool = True
    #: xdist hands items out in contiguous blocks, in test order (recorded parts concatenate)
    in_order: bool = False
    #: items may be decided before they run (a sequential test): under ``--dist load`` the
    #: controller hands them out two at a time and drops those ``pytest_hud_decided`` names
    drops_items: bool = False

    def __post_init__(self) -> None:
        """The checks across options (each option's own ran as it was read)."""
        if self.shared is not None and self.concurrency > self.shared:
            raise ValueError(
                f"--hud-concurrency={self.concurrency} exceeds --hud-shared={self.shared}: a "
                f"shared substrate takes at most {self.shared} rollouts at once, so the "
                f"extra {self.concurrency - self.shared} would only wait; lower the "
                "concurrency or raise the width"
            )
        if self.docker_base is not None and (not self.runtime.backend.builds or self.runtime.arg):
            builders = ", ".join(k for k, b in BACKENDS.items() if b.builds)
            raise ValueError(
                f"--hud-docker-base={self.docker_base} is the base of the images "
                f"--hud-runtime={builders} builds, but the runtime is {self.runtime.raw!r}; "
                f"fix: pass --hud-runtime={builders}, or drop --hud-docker-base"
            )
        if len(self.agents) > 1:
            for name, why in (
                ("checkpoint", "each arm is named by its spec, or by its checkpoints/NNNNNN step"),
                ("baseline", "the first --hud-agent is the reference the others are compared with"),
            ):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"--hud-{name} is for one agent, got {len(self.agents)} --hud-agent "
                        f"({', '.join(self.agent_texts)}); {why}: drop --hud-{name}"
                    )

    @property
    def agent(self) -> AgentSpec:
        """The first (or only) agent: the reference of several."""
        return self.agents[0]

    @property
    def agent_texts(self) -> list[str]:
        """Every agent as it was given (for messages and reports)."""
        return [spec.text for spec in self.agents]

    @classmethod
    def from_config(cls, config: pytest.Config) -> HudOptions:
        """The core's options as given (features' ``configure`` may change them after)."""
        return read_settings(config, cls)

    def finished(self) -> HudOptions:
        """After every feature's ``configure``: several agents' order seed chosen if none was
        given nor resumed (a random one, shown in the header and the results)."""
        if len(self.agents) > 1 and self.ab_seed is None:
            return dataclasses.replace(self, ab_seed=random.SystemRandom().randrange(2**31))
        return self


def addoption(parser: pytest.Parser) -> None:
    add_options(parser, HudOptions)
