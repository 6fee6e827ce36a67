"""RobotBridge's serve loop over the real WebSocket: claims, slots, barrier, faults."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import msgpack
import numpy as np
import pytest
import websockets
from sims import CounterSim, SlotResetCounterSim

from pytest_hud.robot import BridgeError, RobotClient, RobotError
from pytest_hud.robot.wire.codec import pack, unpack
from pytest_hud.robot.wire.transport import IMPLEMENTATIONS

pytestmark = pytest.mark.anyio


async def serving(bridge: CounterSim) -> AsyncIterator[CounterSim]:
    await bridge.start()
    try:
        yield bridge
    finally:
        await bridge.stop()


@pytest.fixture
async def one() -> AsyncIterator[CounterSim]:
    async for b in serving(CounterSim(num_envs=1, length=5)):
        yield b


@pytest.fixture
async def four() -> AsyncIterator[CounterSim]:
    bridge = CounterSim(num_envs=4, length=6)
    bridge.step_timeout = 1.0
    async for b in serving(bridge):
        yield b


async def run_episode(
    client: RobotClient, value: float = 1.0, limit: int = 100, first: dict | None = None
) -> list[dict]:
    """Act ``value`` every tick until terminated; returns every observation seen."""
    seen = [first or await client.get_observation()]
    while not seen[-1]["terminated"] and len(seen) <= limit:
        seen.append(await client.step(np.array([value, 0.0])))
    return seen


async def raw(url: str) -> websockets.ClientConnection:
    return await websockets.connect(url, compression=None, max_size=None, close_timeout=0.2)


async def test_single_slot_episode_without_token(one: CounterSim) -> None:
    ep = await one.claim(seed=3)
    assert ep["prompt"] == "count to 3.0 (seed 3)" and ep["slot"] == 0
    async with await RobotClient.connect(one.url) as client:
        assert client.metadata["claim_required"] is True
        assert client.metadata["protocol"] == "openpi/0"
        assert client.spaces().action_feature.size == 2
        seen = await run_episode(client)
    assert [o["terminated"] for o in seen] == [False] * 5 + [True]
    assert seen[-1]["data"]["observation/state"].tolist() == [5.0, 0.0]
    assert seen[-1]["data"]["observation/image"].shape == (4, 4, 3)
    grade = await one.release(ep["token"])
    assert grade["success"] is True and grade["total_reward"] == 5.0 and grade["seed"] == 3


async def test_compression_is_never_negotiated(one: CounterSim) -> None:
    await one.claim()
    async with websockets.connect(one.url) as ws:  # offers permessage-deflate by default
        assert ws.protocol.extensions == []
        unpack(await ws.recv())


async def test_vectorized_slots_fill_in_order_and_exhaust(four: CounterSim) -> None:
    eps = [await four.claim(seed=1) for _ in range(4)]
    assert [e["slot"] for e in eps] == [0, 1, 2, 3]
    tokens = [e["token"] for e in eps]
    assert len(set(tokens)) == 4 and all(len(t) == 32 for t in tokens)
    with pytest.raises(BridgeError, match="all 4 slots are claimed"):
        await four.claim(seed=1)
    await four.release(tokens[3])
    with pytest.raises(BridgeError, match="no free slot: 3 of 4 are claimed"):
        await four.claim(seed=1)  # without reset_slot, a finished slot waits for the batch
    for t in tokens[:3]:
        await four.release(t)
    assert (await four.claim(seed=5))["slot"] == 0  # all released: a fresh batch


async def test_shared_batch_refuses_different_args(four: CounterSim) -> None:
    await four.claim(seed=1)
    with pytest.raises(BridgeError, match="cannot use {'seed': 2}"):
        await four.claim(seed=2)


async def test_per_slot_results_and_lockstep_barrier(four: CounterSim) -> None:
    eps = [await four.claim(seed=0) for _ in range(3)]  # slot 3 stays free
    clients = [await RobotClient.connect(four.url, token=e["token"]) for e in eps]
    try:
        runs = await asyncio.gather(
            *(run_episode(c, v) for c, v in zip(clients, (1, 2, 0.5), strict=True))
        )
    finally:
        for c in clients:
            await c.close()
    assert all(len(r) == 7 for r in runs)
    grades = [await four.release(e["token"]) for e in eps]
    assert [g["total_reward"] for g in grades] == [6.0, 12.0, 3.0]
    assert [g["success"] for g in grades] == [True, True, True]
    # one barrier step per tick; the free slot 3 got the hold action (zeros) every time
    assert len(four.batches) == 6
    for batch in four.batches:
        assert batch[:3, 0].tolist() == [1, 2, 0.5] and batch[3].tolist() == [0, 0]


async def test_slot_reset_lets_each_slot_run_its_own_args() -> None:
    async for bridge in serving(SlotResetCounterSim(num_envs=2, length=3)):
        a = await bridge.claim(seed=10)
        b = await bridge.claim(seed=20)
        assert (a["slot"], b["slot"]) == (0, 1) and "seed 20" in b["prompt"]
        ca = await RobotClient.connect(bridge.url, token=a["token"])
        cb = await RobotClient.connect(bridge.url, token=b["token"])
        await asyncio.gather(run_episode(ca), run_episode(cb))
        assert (await bridge.release(a["token"]))["seed"] == 10
        # a released slot of a slot-resettable sim is claimable again while slot 1 is busy
        again = await bridge.claim(seed=30)
        assert again["slot"] == 0
        assert (await bridge.release(b["token"]))["seed"] == 20
        await ca.close()
        await cb.close()


@pytest.mark.parametrize("websocket", IMPLEMENTATIONS)
async def test_dropped_agent_does_not_stall_its_peers(four: CounterSim, websocket: str) -> None:
    eps = [await four.claim() for _ in range(2)]
    a = await RobotClient.connect(four.url, token=eps[0]["token"], websocket=websocket)
    b = await RobotClient.connect(four.url, token=eps[1]["token"], websocket=websocket)
    await a.get_observation()
    await b.get_observation()
    await a.send_action([1, 0])  # a is waiting on b for the barrier ... and b drops
    await b.close()
    obs = await a.get_observation(timeout=5)
    assert obs["data"]["observation/state"][0] == 1.0
    rest = await run_episode(a, first=obs)
    assert rest[-1]["terminated"]
    assert (await four.release(eps[1]["token"]))["ticks"] == 6  # held while away
    await a.close()


@pytest.mark.parametrize("websocket", IMPLEMENTATIONS)
async def test_silent_agent_times_out_while_a_peer_waits(four: CounterSim, websocket: str) -> None:
    eps = [await four.claim() for _ in range(2)]
    active = await RobotClient.connect(four.url, token=eps[0]["token"], websocket=websocket)
    silent = await RobotClient.connect(four.url, token=eps[1]["token"], websocket=websocket)
    await silent.get_observation()
    seen = await run_episode(active)
    assert seen[-1]["terminated"]
    with pytest.raises(RobotError, match="never acted within 1.0 s"):
        await silent.get_observation(timeout=5)
    await active.close()
    await silent.close()


async def test_claimed_slot_whose_agent_never_connects_times_out(four: CounterSim) -> None:
    eps = [await four.claim() for _ in range(2)]
    async with await RobotClient.connect(four.url, token=eps[0]["token"]) as active:
        seen = await run_episode(active)
    assert seen[-1]["terminated"]
    slots = await four.control(None, "slots", {})  # type: ignore[arg-type]
    assert slots[1]["reason"] == "timed out (never connected)"
    with pytest.raises(RobotError, match="episode is over"):
        await RobotClient.connect(four.url, token=eps[1]["token"])


async def test_client_that_never_claims_gets_an_error(one: CounterSim) -> None:
    one.claim_timeout = 0.2
    await one.claim()
    ws = await raw(one.url)
    unpack(await ws.recv())
    msg = await asyncio.wait_for(ws.recv(), 5)
    assert isinstance(msg, str) and "no claim frame within 0.2 s" in msg


async def test_unknown_and_stolen_tokens_are_refused(four: CounterSim) -> None:
    ep = await four.claim()
    with pytest.raises(RobotError, match="unknown or expired slot token"):
        await RobotClient.connect(four.url, token="not-a-token")
    with pytest.raises(RobotError, match="needs a one-slot sim"):
        await RobotClient.connect(four.url)  # tokenless on a vectorized sim
    owner = await RobotClient.connect(four.url, token=ep["token"])
    with pytest.raises(RobotError, match="already has a live agent connection"):
        await RobotClient.connect(four.url, token=ep["token"])
    seen = await run_episode(owner)  # the rightful owner is unaffected
    assert seen[-1]["terminated"]
    await owner.close()


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (pack({"actions": np.zeros(5, np.float32)}), "action has 5 values.*has 2"),
        (pack({"actions": np.zeros((3, 2), np.float32)}), r"shape \(3, 2\)"),
        (pack({"act": 1}), r"expected \{\"actions\": array\}"),
        (pack({"actions": np.array([np.nan, 0], np.float32)}), "NaN"),
        ("hello", "got a text frame"),
        (b"\xc1\xc1", "not openpi/0 msgpack"),
    ],
    ids=["wrong-size", "chunk", "no-actions-key", "nan", "text-frame", "not-msgpack"],
)
async def test_bad_actions_get_an_error_frame(one: CounterSim, frame, match) -> None:
    await one.claim()
    ws = await raw(one.url)
    unpack(await ws.recv())
    await ws.send(pack({"claim": None}))
    unpack(await ws.recv())
    await ws.send(frame)
    err = await asyncio.wait_for(ws.recv(), 5)
    assert isinstance(err, str)
    assert pytest.importorskip("re").search(match, err), err
    await ws.close()


async def test_bad_claims_get_an_error_frame(one: CounterSim) -> None:
    await one.claim()
    for frame, match in [
        (pack({"hello": 1}), 'first frame must be {"claim"'),
        (pack({"claim": 5}), "token must be a string"),
        ("text", "text frame"),
    ]:
        ws = await raw(one.url)
        unpack(await ws.recv())
        await ws.send(frame)
        err = await asyncio.wait_for(ws.recv(), 5)
        assert isinstance(err, str) and match in err
        await ws.close()


async def test_sim_exception_fails_every_affected_agent_and_serving_goes_on() -> None:
    bridge = CounterSim(num_envs=2, length=5, fail_at=2)
    async for b in serving(bridge):
        eps = [await b.claim() for _ in range(2)]
        clients = [await RobotClient.connect(b.url, token=e["token"]) for e in eps]
        results = await asyncio.gather(*(run_episode(c) for c in clients), return_exceptions=True)
        for r in results:
            assert isinstance(r, RobotError) and "the sim blew up on purpose" in str(r)
        for e in eps:
            await b.release(e["token"])
        b.fail_at = None
        ep = await b.claim()
        async with await RobotClient.connect(b.url, token=ep["token"]) as c:
            assert (await run_episode(c))[-1]["terminated"]


async def test_action_after_termination_is_an_error(one: CounterSim) -> None:
    await one.claim()
    client = await RobotClient.connect(one.url)
    await run_episode(client)
    await client.send_action([1, 0])
    with pytest.raises(RobotError, match="action after the episode ended"):
        await client.get_observation(timeout=5)


async def test_fuzz_then_a_well_behaved_client_still_works() -> None:
    bridge = CounterSim(num_envs=2, length=4)
    bridge.claim_timeout = 2.0
    rng = random.Random(1234)
    samples = [
        lambda: rng.randbytes(rng.randrange(0, 64)),
        lambda: pack({"claim": rng.choice([None, "x", 3, b"b"])}),
        lambda: pack({"actions": np.asarray([rng.random() for _ in range(rng.randrange(0, 4))])}),
        lambda: msgpack.packb(
            {
                b"__ndarray__": True,
                b"data": rng.randbytes(8),
                b"dtype": rng.choice(["<f4", "|O", "zz", "<c8"]),
                b"shape": [rng.randrange(-2, 9)],
            }
        ),
        lambda: "".join(rng.choice("ab{}") for _ in range(10)),
        lambda: pack([1, 2, {"claim": None}]),
    ]
    async for b in serving(bridge):
        eps = [await b.claim() for _ in range(2)]
        sent = 0
        for round_ in range(45):
            ws = await raw(b.url)
            try:
                unpack(await ws.recv())
                if round_ % 3 == 0:  # sometimes claim for real first, then garbage
                    await ws.send(pack({"claim": eps[round_ % 2]["token"]}))
                for _ in range(50):
                    await ws.send(rng.choice(samples)())
                    sent += 1
            except websockets.ConnectionClosed:
                pass
            finally:
                await ws.close()
        assert sent >= 1000
        for e in eps:
            await b.release(e["token"])
        ep = await b.claim(seed=9)
        async with await RobotClient.connect(b.url, token=ep["token"]) as c:
            seen = await run_episode(c)
        assert seen[-1]["terminated"] and len(seen) == 5
        grade = await b.release(ep["token"])
        assert grade["total_reward"] == 4.0 and grade["seed"] == 9


async def test_client_observation_wait_is_bounded(one: CounterSim) -> None:
    await one.claim()
    client = await RobotClient.connect(one.url)
    await client.get_observation()
    # no action sent: the bridge never answers, so the wait must end by itself
    with pytest.raises(RobotError, match="timed out after 0.3 s waiting for an observation"):
        await client.get_observation(timeout=0.3)
    seen = await run_episode(client, first={"terminated": False})  # still usable afterwards
    assert seen[-1]["terminated"]
    await client.close()


async def test_tokenless_claim_cannot_take_an_episode_reset_through_the_control_channel(
    one: CounterSim,
) -> None:
    """Issue 12 #5: ``{"claim": None}`` took the one slot before the real agent arrived."""
    ep = await one.control(None, "reset", {"seed": 1})  # type: ignore[arg-type]
    with pytest.raises(RobotError, match="claim without a token is refused"):
        await RobotClient.connect(one.url)
    assert [s["state"] for s in await one.control(None, "slots", {})] == ["claimed"]  # type: ignore[arg-type]
    agent = await RobotClient.connect(one.url, token=ep["token"])  # the rightful agent
    seen = await run_episode(agent)
    assert seen[-1]["terminated"]
    await agent.close()
    await one.control(None, "result", {"token": ep["token"]})  # type: ignore[arg-type]
    # an episode claimed in-process (no token handed out elsewhere) still allows it
    await one.claim(seed=2)
    anonymous = await RobotClient.connect(one.url)
    assert (await run_episode(anonymous))[-1]["terminated"]
    await anonymous.close()
