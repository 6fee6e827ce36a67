#!/usr/bin/env python
"""Drive an openpi/0 bridge with the real HUD SDK's RobotClient (run with the HUD venv's python).

    hud_agent.py --capability JSON|@FILE|- [--token T] [--policy zero|random] [--seed S]
                 [--max-steps N] [--step-timeout SEC]
                 [--pack-action JSON ...] [--decode-hex HEX ...]

The capability is a manifest entry ``{"name", "protocol", "url", "params": {"contract"}}``
(``-`` reads it from stdin). The agent builds a HUD ``Capability`` from it, connects with
``RobotClient.connect(cap, token=...)``, reads ``spaces()``, and sends zero or uniform
random actions sized from the contract's action feature until an observation says
``terminated`` (or ``--max-steps``). Without a capability it only runs the codec parts:

* ``--pack-action JSON``: the hex of ``openpi_client.msgpack_numpy.packb({"actions":
  np.asarray(JSON, float32)})``, i.e. the frame ``RobotClient.send_action`` sends;
* ``--decode-hex HEX``: decode a frame with openpi's ``unpackb``, describe it, and
  re-pack it with ``packb``.

Prints one JSON object on stdout (and exits 1 if ``error`` is set).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from typing import Any

import numpy as np
from frames_json import describe
from hud.capabilities import Capability
from hud.capabilities.robot import RobotClient
from openpi_client import msgpack_numpy


def spec(value: Any) -> dict[str, Any]:
    a = np.asarray(value)
    return {"type": type(value).__name__, "dtype": a.dtype.str, "shape": list(a.shape)}


def action_size(feature: dict[str, Any]) -> int:
    if feature.get("names"):
        return len(feature["names"])
    if feature.get("shape"):
        return int(np.prod(feature["shape"]))
    raise ValueError(f"the contract's action feature has neither names nor shape: {feature}")


def action_bounds(feature: dict[str, Any], size: int) -> tuple[np.ndarray, np.ndarray]:
    stats = feature.get("stats") or {}
    low = np.asarray(stats.get("min", [-1.0] * size), np.float32).reshape(-1)
    high = np.asarray(stats.get("max", [1.0] * size), np.float32).reshape(-1)
    return low, high


async def rollout(args: argparse.Namespace, manifest: dict[str, Any], out: dict[str, Any]) -> None:
    cap = Capability.from_manifest(manifest)
    out["url"] = cap.url
    client = await asyncio.wait_for(
        RobotClient.connect(cap, token=args.token), args.step_timeout + 35
    )
    try:
        action_space, obs_space = client.spaces()
        size = action_size(action_space)
        low, high = action_bounds(action_space, size)
        out.update(
            contract=client.contract,
            action_space=action_space,
            observation_space=obs_space,
            action_size=size,
            control_rate=client.get_control_rate(),
        )
        rng = np.random.default_rng(args.seed)
        seen: dict[str, list[dict[str, Any]]] = {}
        reward_specs: list[dict[str, Any]] = []

        def record(obs: dict[str, Any]) -> None:
            for key, value in obs["data"].items():
                entry = spec(value)
                if entry not in seen.setdefault(key, []):
                    seen[key].append(entry)
            if "reward" in obs:
                entry = spec(obs["reward"])
                if entry not in reward_specs:
                    reward_specs.append(entry)

        obs = await asyncio.wait_for(client.get_observation(), args.step_timeout)
        record(obs)
        out["observation_keys"] = list(obs["data"])
        out["first_observation"] = {k: np.asarray(v).tolist() for k, v in obs["data"].items()}
        out["first_terminated"] = bool(obs["terminated"])
        steps, total, terminated = 0, 0.0, bool(obs["terminated"])
        while not terminated and steps < args.max_steps:
            if args.policy == "zero":
                action = np.zeros(size, np.float32)
            else:
                action = rng.uniform(low, high, size=size).astype(np.float32)
            await client.send_action(action)
            obs = await asyncio.wait_for(client.get_observation(), args.step_timeout)
            steps += 1
            record(obs)
            if obs.get("reward") is not None:
                total += float(obs["reward"])
            terminated = bool(obs["terminated"])
            out["steps"], out["terminated"] = steps, terminated
        out.update(
            steps=steps,
            terminated=terminated,
            total_reward=total,
            observation_specs=seen,
            reward_specs=reward_specs,
            last_observation={k: np.asarray(v).tolist() for k, v in obs["data"].items()},
        )
    finally:
        await asyncio.wait_for(client.close(), 10)


def load_manifest(text: str) -> dict[str, Any]:
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        with open(text[1:]) as f:
            text = f.read()
    manifest = json.loads(text)
    if "capability" in manifest:  # accept hud_serve.py's whole "ready" line too
        manifest = manifest["capability"]
    return manifest


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--capability", default=None, help="manifest JSON, @file, or - for stdin")
    p.add_argument("--token", default=None)
    p.add_argument("--policy", choices=("zero", "random"), default="zero")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=1000)
    p.add_argument("--step-timeout", type=float, default=60.0, help="bound on each wait")
    p.add_argument("--pack-action", action="append", default=[], metavar="JSON")
    p.add_argument("--decode-hex", action="append", default=[], metavar="HEX")
    args = p.parse_args()

    out: dict[str, Any] = {"token": args.token, "policy": args.policy, "error": None}
    try:
        out["packed_actions"] = [
            {
                "action": json.loads(a),
                "hex": msgpack_numpy.packb(
                    {"actions": np.asarray(json.loads(a), dtype=np.float32)}
                ).hex(),
            }
            for a in args.pack_action
        ]
        out["claim_frame_hex"] = msgpack_numpy.packb({"claim": args.token}).hex()
        decoded = []
        for h in args.decode_hex:
            value = msgpack_numpy.unpackb(bytes.fromhex(h))
            decoded.append(
                {"value": describe(value), "repacked_hex": msgpack_numpy.packb(value).hex()}
            )
        out["decoded"] = decoded
        if args.capability is not None:
            asyncio.run(rollout(args, load_manifest(args.capability), out))
    except BaseException as exc:  # report everything as data; the caller asserts on it
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
    print(json.dumps(out), flush=True)
    sys.exit(1 if out["error"] else 0)


if __name__ == "__main__":
    main()
