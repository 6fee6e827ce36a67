"""LeRobot checkpoints as Models and agents, run through their own processors as lerobot-eval
does. All torch work runs on the thread that loaded the policy (:func:`torch_thread`).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.errors import CheckpointError
from pytest_hud.plumbing.threads import DaemonExecutor
from pytest_hud.robot import lerobot_version as compat
from pytest_hud.robot.agent.adapter import LeRobotAdapter
from pytest_hud.robot.agent.agent import RobotAgent
from pytest_hud.robot.agent.device import placed_device
from pytest_hud.robot.agent.ensembler import Ensembler
from pytest_hud.robot.agent.hub import require_hub_checkpoint
from pytest_hud.robot.agent.model import Batch, Model

__all__ = [
    "PI05_CHECKPOINT",
    "CheckpointError",
    "LeRobotModel",
    "check_checkpoint",
    "lerobot_agent",
    "load_policy",
    "pi05_agent",
    "pi05_source",
    "torch_thread",
]

#: The pi0.5 checkpoint fine-tuned on LIBERO (``--hud-agent=pi05``).
PI05_CHECKPOINT = "lerobot/pi05_libero_finetuned"

SETUP_HINT = "install them with pip install 'pytest-hud[lerobot]'"

#: Policy types without an action-chunk interface LeRobotModel can drive.
_UNSUPPORTED = {
    "sac": "an RL actor without action chunks",
    "tdmpc": "a planner that keeps per-episode state",
    "reward_classifier": "a reward model, not a policy",
}


def _import_torch() -> Any:
    try:
        import lerobot  # noqa: F401
        import torch
    except ImportError as exc:
        raise ImportError(
            f"LeRobot policies need torch and lerobot ({exc.name} is missing): {SETUP_HINT}"
        ) from None
    return torch


_torch_executor: DaemonExecutor | None = None
_torch_lock = threading.Lock()


def torch_thread() -> DaemonExecutor:
    """The one thread this process runs torch on (checkpoint loads and every forward).

    Under pytest-xdist, unless ``OMP_NUM_THREADS`` says otherwise, each worker's torch
    gets its share of the cores, so workers do not oversubscribe them.
    """
    global _torch_executor
    with _torch_lock:
        if _torch_executor is None:
            # a daemon thread: a forward wedged in torch does not hold the process at exit
            _torch_executor = DaemonExecutor(
                1, thread_name_prefix="pytest-hud-torch", initializer=_share_cores
            )
        return _torch_executor


def _share_cores() -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        torch = _import_torch()
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


class LeRobotModel(Model):
    """A LeRobot policy plus its pre/post-processors as a stateless batched Model.

    ``infer(batch)`` takes rows stacked from :class:`LeRobotAdapter` (CHW float32 images in
    [0, 1] under the policy's image keys, ``observation.state`` float32, ``task`` a list of N
    prompts) and returns float32 ``[N, T, A]`` actions in the env's units (unnormalized by
    the postprocessor). ``device`` is where input tensors are made (default: where the
    policy's parameters live); the preprocessor's own device step still applies.
    """

    def __init__(
        self,
        policy: Any,
        preprocess: Any,
        postprocess: Any,
        *,
        ensembler: Ensembler | None = None,
        device: object = None,
    ) -> None:
        torch = _import_torch()
        config = getattr(policy, "config", None)
        kind = getattr(config, "type", None)
        if kind in _UNSUPPORTED:
            raise TypeError(
                f"LeRobotModel runs action-chunk policies; {kind!r} is {_UNSUPPORTED[kind]}: "
                "wrap it in your own Model subclass"
            )
        self.policy = policy
        self.policy.eval()
        self.preprocess = preprocess
        self.postprocess = postprocess
        self.ensembler = ensembler
        if device is None:
            param = next(iter(policy.parameters()), None)
            device = param.device if param is not None else "cpu"
        self.device = torch.device(device)
        #: How many actions of each chunk LeRobot's own select_action would execute.
        self.n_action_steps = getattr(config, "n_action_steps", None)
        #: Observations per row the agent should send (the policy's own history length:
        #: Diffusion, VQ-BeT).
        self.n_obs_steps = max(1, int(getattr(config, "n_obs_steps", 1) or 1))
        features = getattr(config, "input_features", None) or {}
        #: The input features a history policy keeps its last ``n_obs_steps`` of.
        self._history = list(features) if self.n_obs_steps > 1 else []
        #: Dimensions of each input feature, to tell a row with a history axis from one without.
        self._feature_dims = {k: len(getattr(f, "shape", ()) or ()) for k, f in features.items()}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        kind = getattr(getattr(self.policy, "config", None), "type", type(self.policy).__name__)
        return f"<LeRobotModel {kind} on {self.device}>"

    def executor(self) -> Executor:
        return torch_thread()

    def infer(self, batch: Batch) -> np.ndarray:
        torch = _import_torch()
        tensors = {
            key: torch.from_numpy(np.ascontiguousarray(value)).to(self.device)
            if isinstance(value, np.ndarray)
            else value
            for key, value in batch.items()
        }
        with torch.inference_mode():
            steps = self._history_length(tensors)
            if steps:  # rows carry [N, H, ...]: each step preprocessed, as upstream per tick
                history = [
                    self.preprocess({k: self._at(k, v, h) for k, v in tensors.items()})
                    for h in range(steps)
                ]
                chunk = self._predict_from_history(history)
            else:
                obs = self.preprocess(tensors)
                chunk = self._predict(obs)  # [N, T, A], normalized
            n, t, a = chunk.shape
            # Postprocessors are written for [B, A] actions (LeRobot's policy server runs
            # them per time step); folding T into B is the same elementwise computation.
            actions = self.postprocess(chunk.reshape(n * t, a))
            actions = actions.reshape(n, t, -1)
        return actions.detach().to("cpu", torch.float32).numpy()

    def _history_length(self, tensors: dict[str, Any]) -> int:
        """H when the batch's features carry a history axis ``[N, H, ...]``, else 0."""
        if not self._history:
            return 0
        found = {int(v.shape[1]) for k, v in tensors.items() if self._has_history_axis(k, v)}
        if len(found) > 1:
            raise ValueError(f"history lengths differ between the batch's features: {found}")
        return found.pop() if found else 0

    def _has_history_axis(self, key: str, value: object) -> bool:
        """Whether ``value`` is feature ``key`` with a history axis: ``[N, H, ...]``."""
        dims = self._feature_dims.get(key)
        return dims is not None and getattr(value, "ndim", None) == dims + 2

    def _at(self, key: str, value: Any, h: int) -> object:
        return value[:, h] if self._has_history_axis(key, value) else value

    def _predict(self, obs: dict[str, Any]) -> object:
        if not self._history:
            return self.policy.predict_action_chunk(obs)
        return self._predict_from_history([obs])

    def _predict_from_history(self, history: list[dict[str, Any]]) -> Any:
        """What ``select_action`` does when its action queue runs dry, without keeping
        state: the chunk predicted with ``history`` as the policy's last observations
        (:func:`~pytest_hud.robot.lerobot_version.predict_from_history`, which reaches
        the policy's queues where LeRobot offers no public way). The lock keeps concurrent
        calls off the policy's shared queues."""
        missing = [k for k in self._history if any(k not in step for step in history)]
        if missing:
            raise KeyError(
                f"the policy keeps a history of {missing}, which the batch lacks "
                f"(batch keys: {sorted(history[-1])})"
            )
        with self._lock:
            return compat.predict_from_history(self.policy, history)


# -- loading ---------------------------------------------------------------------------
def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", ".", "~")) or spec.count("/") != 1 or spec.endswith("/")


def check_checkpoint(spec: str) -> str:
    """The checkpoint's source (a folder, or the hub id), after the checks that need no
    torch: a folder has a config.json; a hub id is cached or the hub is reachable now
    (seconds, not minutes of download retries, when offline)."""
    local = Path(spec).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise CheckpointError(
                f"{spec!r} is not a LeRobot checkpoint folder: it has no config.json "
                "(expected what policy.save_pretrained(folder) writes)"
            )
        return str(local)
    if _looks_like_path(spec):
        raise CheckpointError(f"no LeRobot checkpoint folder at {spec!r}")
    require_hub_checkpoint(spec)
    return spec  # lerobot downloads it (or reads the hub cache)


def load_policy(path_or_repo: str | Path, *, device: str | None = None) -> tuple[Any, Any, Any]:
    """``(policy, preprocess, postprocess)`` from a checkpoint folder or a hub id, loaded
    on :func:`torch_thread` (where LeRobotModel runs its forwards).

    The policy class comes from the config's ``type`` (``get_policy_class``), the weights
    from ``from_pretrained``, the processors from ``make_pre_post_processors(config,
    pretrained_path=...)`` with their device step moved to the policy's device. ``device``
    (default: the one the session placed this process on, ``--hud-devices``, else the
    checkpoint's own) replaces the config's.
    """
    _import_torch()  # the clear ImportError, on the caller's thread
    device = device or placed_device()
    return torch_thread().submit(_load_policy, path_or_repo, device).result()


def _load_policy(path_or_repo: str | Path, device: str | None) -> tuple[object, object, object]:
    torch = _import_torch()
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    spec = str(path_or_repo)
    source = check_checkpoint(spec)
    from_hub = source == spec and not Path(spec).expanduser().exists()

    try:
        config = PreTrainedConfig.from_pretrained(source)
    except Exception as exc:
        if from_hub:
            reason = f"{type(exc).__name__}: {exc}"
            raise CheckpointError(
                f"cannot fetch the LeRobot checkpoint {spec!r} from the Hugging Face Hub "
                f"({reason}). Loading a hub id needs hub access (or the checkpoint in the "
                "local hub cache); otherwise download it elsewhere and pass its folder",
                reason=reason,
            ) from None
        raise CheckpointError(f"cannot read {spec!r}'s config.json: {exc}") from None
    if device is not None:
        config.device = device
    kind = config.type
    try:
        policy_cls = get_policy_class(kind)
    except ImportError as exc:
        raise CheckpointError(
            f"{spec!r} is a {kind!r} policy, whose code needs {exc.name or 'extra packages'} "
            f"(pip install 'lerobot[{kind}]'): {exc}"
        ) from None
    except (ValueError, NotImplementedError) as exc:
        raise CheckpointError(
            f"{spec!r} has policy type {kind!r}, unknown to lerobot: {exc}"
        ) from None
    try:
        policy = policy_cls.from_pretrained(source, config=config)
    except OSError as exc:
        raise CheckpointError(f"cannot load {spec!r}'s weights: {exc}") from None
    policy.eval()
    param = next(iter(policy.parameters()), None)
    where = str(param.device if param is not None else torch.device(config.device))
    try:
        pre, post = make_pre_post_processors(
            policy.config,
            pretrained_path=source,
            preprocessor_overrides={"device_processor": {"device": where}},
        )
    except OSError as exc:
        raise CheckpointError(
            f"{spec!r} has no usable pre/post-processors ({exc}); checkpoints saved before "
            "lerobot 0.4 need lerobot.processor.migrate_policy_normalization first"
        ) from None
    return policy, pre, post


def _default_ensembler(config: object) -> Ensembler | None:
    """ACT checkpoints trained with temporal ensembling blend every tick's chunk, as upstream."""
    coeff = getattr(config, "temporal_ensemble_coeff", None)
    return Ensembler("temporal", k=float(coeff)) if coeff is not None else None


def lerobot_agent(
    path_or_policy: str | Path | Any,
    *,
    preprocess: object = None,
    postprocess: object = None,
    device: str | None = None,
    ensembler: Ensembler | None = None,
    chunk_size: int | None = None,
    name: str | None = None,
) -> RobotAgent:
    """A RobotAgent for any LeRobot checkpoint (a folder, or a hub id when online), or for
    a policy object the caller holds (a training loop's, at this step) with its
    ``preprocess``/``postprocess`` pipelines (lerobot's ``make_pre_post_processors``).

    The env's cameras map onto the policy's image keys in contract order
    (``LeRobotAdapter``); ``chunk_size`` defaults to the policy's ``n_action_steps``. A
    held policy is used as it is, not copied: it is put in eval mode (call its
    ``train()`` before the next update) and its forwards run on :func:`torch_thread`.
    """
    if isinstance(path_or_policy, str | Path):
        policy, pre, post = load_policy(path_or_policy, device=device)
        label = f"lerobot:{path_or_policy}"
    else:
        if preprocess is None or postprocess is None:
            raise TypeError(
                f"lerobot_agent({type(path_or_policy).__name__} object): a held policy needs "
                "preprocess= and postprocess= (its pipelines, as lerobot-train's "
                "make_pre_post_processors returns them); got "
                f"preprocess={preprocess!r}, postprocess={postprocess!r}"
            )
        policy, pre, post = path_or_policy, preprocess, postprocess
        label = f"lerobot:{getattr(policy.config, 'type', type(policy).__name__)}"
    config = policy.config
    model = LeRobotModel(policy, pre, post, ensembler=ensembler or _default_ensembler(config))
    adapter = LeRobotAdapter(model_image_keys=list(config.image_features))
    steps = chunk_size if chunk_size is not None else getattr(config, "n_action_steps", None)
    return RobotAgent(model, adapter, chunk_size=steps, name=name or label)


_PI05_HINT = (
    "Pass a local copy of the checkpoint: --hud-agent=pi05:/path/to/pi05_libero_finetuned "
    "(or lerobot:/path/to/it)"
)


def pi05_source() -> str:
    """The pi0.5 LIBERO hub id when it is in the local hub cache or the hub is reachable
    now; else a CheckpointError naming the ``pi05:/path`` form (also the xdist
    controller's preflight, so ``-n 8`` users read the same fix)."""
    from pytest_hud.robot.agent.hub import cached_or_reachable

    try:
        return cached_or_reachable(PI05_CHECKPOINT, hint=_PI05_HINT)
    except CheckpointError as exc:
        raise _pi05_error(exc) from None


def _pi05_error(exc: CheckpointError) -> CheckpointError:
    return CheckpointError(
        f"pi05: cannot load the pi0.5 LIBERO checkpoint {PI05_CHECKPOINT!r} "
        f"({exc.reason or exc}). {_PI05_HINT}",
        reason=exc.reason,
    )


def pi05_agent(arg: str | None = None) -> RobotAgent:
    """pi0.5 fine-tuned on LIBERO (``--hud-agent=pi05``, or ``pi05:/local/checkpoint``).

    Without a path the hub checkpoint is taken from the local hub cache, or downloaded
    when the hub is reachable; offline it fails at once naming the ``pi05:/path`` form
    (:func:`pi05_source`), not after the hub's retries.
    """
    if arg:
        return lerobot_agent(arg, name=f"pi05:{arg}")
    _import_torch()
    source = pi05_source()
    try:
        return lerobot_agent(source, name="pi05")
    except CheckpointError as exc:
        raise _pi05_error(exc) from None
