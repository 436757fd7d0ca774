"""The broker: request handlers are pure functions of requests and state; asyncio
(network.py) only moves bytes."""
