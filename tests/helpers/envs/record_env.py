"""Env module for the dataset-recording tests: Pendulum with a named contract, and a
vectorized variant (``build(num_envs)``) for concurrent episodes on one sim."""

from pytest_hud import Environment

PROMPT = "Swing the pendulum up."
CONTRACT = {
    "control_rate": 30,
    "robot_type": "pendulum",
    "features": {
        "observation/state": {
            "role": "observation",
            "dtype": "float32",
            "shape": [3],
            "names": ["cos_theta", "sin_theta", "theta_dot"],
        },
        "action": {"role": "action", "dtype": "float32", "shape": [1], "names": ["torque"]},
    },
}


def build(num_envs: int = 1) -> Environment:
    env = Environment("pendulum_rec")
    sim = env.gym("Pendulum-v1", num_envs=num_envs, prompt=PROMPT, contract=CONTRACT)

    @env.template()
    async def swing(seed: int = 0):
        ep = await sim.reset(seed=seed)
        yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    return env


env = build()
