"""The principal a TLS client gets, read from the broker's own sessions: the broker runs in
process (its real listeners on loopback), a client connects with or without a certificate
and the test looks at the session the network layer made for it."""

from __future__ import annotations

import asyncio
import ssl
import struct

import pytest

from broker.config.server import BrokerConfig
from broker.protocol.apis import API_VERSIONS
from broker.protocol.framing import decode_response, encode_request
from broker.server.broker import Broker
from broker.server.request import ANONYMOUS
from tests.helpers.aio import run
from tests.helpers.certs import TestCA


@pytest.fixture
def ca(tmp_path):
    return TestCA(tmp_path / "ca")


async def _serving(tmp_path, ca: TestCA, **overrides: str) -> Broker:
    server = ca.issue("broker", hosts=["127.0.0.1"])
    config = BrokerConfig.from_mapping(
        {
            "log.dirs": str(tmp_path / "logs"),
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(server.keystore),
            "ssl.truststore.location": str(ca.pem),
            **overrides,
        }
    )
    broker = Broker(config)
    await broker.start()
    return broker


async def _api_versions(port: int, context: ssl.SSLContext) -> tuple:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    writer.write(encode_request(API_VERSIONS, 3, 7, "tls-test", {}))
    await writer.drain()
    try:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return decode_response(API_VERSIONS, 3, await reader.readexactly(size)), writer
    except (asyncio.IncompleteReadError, ConnectionResetError, ssl.SSLError):
        writer.close()
        return None, None


def _client(ca: TestCA, issued=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.pem))
    if issued is not None:
        context.load_cert_chain(issued.cert, issued.key)
    return context


def _ssl_sessions(broker: Broker):
    network = next(n for n in broker.networks if n.listener == "SSL")
    return network, network.sessions()


@pytest.mark.parametrize(
    ("rules", "principal"),
    [
        ("DEFAULT", "User:CN=alice,OU=eng,O=corp"),
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$1.$2/U", "User:ALICE.ENG"),
    ],
)
def test_the_certificate_subject_gives_the_principal(tmp_path, ca, rules, principal):
    alice = ca.issue("alice", organization="corp", unit="eng")

    async def scenario():
        broker = await _serving(
            tmp_path, ca, **{"ssl.client.auth": "required", "ssl.principal.mapping.rules": rules}
        )
        try:
            (_, body), writer = await _api_versions(
                _ssl_sessions(broker)[0].port, _client(ca, alice)
            )
            assert body["error_code"] == 0
            network, sessions = _ssl_sessions(broker)
            assert [s.principal for s in sessions] == [principal]
            assert sessions[0].security_protocol == "SSL"
            writer.close()
        finally:
            await broker.stop()

    run(scenario())


def test_requested_client_auth_without_a_certificate_is_anonymous(tmp_path, ca):
    async def scenario():
        broker = await _serving(tmp_path, ca, **{"ssl.client.auth": "requested"})
        try:
            (_, body), writer = await _api_versions(_ssl_sessions(broker)[0].port, _client(ca))
            assert body["error_code"] == 0
            assert [s.principal for s in _ssl_sessions(broker)[1]] == [ANONYMOUS]
            writer.close()
        finally:
            await broker.stop()

    run(scenario())


def test_a_subject_no_rule_takes_closes_the_connection(tmp_path, ca):
    mallory = ca.issue("mallory", organization="elsewhere")

    async def scenario():
        broker = await _serving(
            tmp_path,
            ca,
            **{
                "ssl.client.auth": "required",
                "ssl.principal.mapping.rules": "RULE:^CN=(.*?),O=corp$/$1/",
            },
        )
        try:
            port = _ssl_sessions(broker)[0].port
            answer, _ = await _api_versions(port, _client(ca, mallory))
            assert answer is None
            assert _ssl_sessions(broker)[1] == []
        finally:
            await broker.stop()

    run(scenario())
