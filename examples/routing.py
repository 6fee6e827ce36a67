"""The four routing patterns of placement, as providers you can pass to ``run`` or pytest.

Each is a plain callable ``(task) -> async context manager yielding a Runtime``:
routing is composition, not configuration.
"""

from __future__ import annotations

from pathlib import Path

from pytest_hud import Environment, LocalRuntime, Runtime, SubprocessRuntime, Task
from pytest_hud.runtime import Provider

ENVS = Path(__file__).parent / "envs"


def fresh_per_rollout() -> Provider:
    """The default: every rollout gets its own new substrate (here, a child process)."""
    return SubprocessRuntime(ENVS / "pendulum.py")


def build_from_row() -> Provider:
    """One declaration, one scene per acquisition: the row's args pick what to build."""

    def build(task: Task) -> Environment:
        env = Environment(task.env)
        sim = env.gym(str(task.args.get("gym_id", "Pendulum-v1")))

        @env.template(id=task.id)
        async def episode(seed: int = 0, gym_id: str = "Pendulum-v1"):
            ep = await sim.reset(seed=seed)
            yield {"prompt": f"{gym_id} seed {seed}", "robot": {"token": ep["token"]}}
            yield await sim.result(token=ep["token"])

        return env

    return LocalRuntime(build)


def route_by_env(providers: dict[str, Provider]) -> Provider:
    """A heterogeneous batch: the row's env picks the provider."""

    def route(task: Task):
        if task.env not in providers:
            raise LookupError(f"no provider for env {task.env!r}; have {sorted(providers)}")
        return providers[task.env](task)

    return route


def borrow_warm(servers: dict[str, str]) -> Provider:
    """Warm servers someone else runs, picked by the row's ``server`` metadata column:
    entering provisions nothing, episodes vary through task args."""
    runtimes = {name: Runtime(url) for name, url in servers.items()}

    def route(task: Task):
        return runtimes[str(task.metadata["server"])](task)

    return route
