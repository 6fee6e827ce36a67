"""The robot wire: the msgpack codec, the WebSocket transports (ours and websockets'),
vectored send and RobotClient. Depends only on robot.contract."""
