"""The client's SASL exchange without a socket (broker/security/sasl_client.py): answers
pushed through the machine by hand, and whole exchanges against the broker's own side,
the authenticator's state machine with its PLAIN and SCRAM servers, the bytes of each
request and answer going through the client core (broker/protocol/client_connection.py)
and the broker's framing."""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import pytest

from broker.protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from broker.protocol.client_connection import ClientConnection
from broker.protocol.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from broker.protocol.framing import decode_request, encode_response
from broker.security.authenticator import SaslAuthenticator, SaslSettings, State
from broker.security.plain import PlainServer
from broker.security.sasl_client import SaslExchange
from broker.security.scram import MECHANISMS, ScramError, ScramServer, make_credential

ENABLED = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def handshake_ok(enabled=ENABLED) -> dict:
    return {"error_code": 0, "mechanisms": enabled}


def auth_ok(token: bytes, lifetime_ms: int = 0) -> dict:
    return {
        "error_code": 0,
        "error_message": None,
        "auth_bytes": token,
        "session_lifetime_ms": lifetime_ms,
    }


def auth_failed(message: str) -> dict:
    return {"error_code": 58, "error_message": message, "auth_bytes": b""}


# -- the machine, answers by hand --


def test_plain_sends_user_and_password_and_takes_an_empty_reply():
    exchange = SaslExchange("PLAIN", "alice", "alice-secret")
    assert exchange.start() == (SASL_HANDSHAKE, {"mechanism": "PLAIN"})
    api_key, body = exchange.receive(handshake_ok())
    assert (api_key, body) == (SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0alice-secret"})
    assert exchange.receive(auth_ok(b"", lifetime_ms=60000)) is None
    assert exchange.complete and exchange.session_lifetime_ms == 60000


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_the_scram_server(mechanism):
    mech = MECHANISMS[mechanism]
    credential = make_credential(mech, "alice-secret", iterations=4096)
    server = ScramServer(mech, {"alice": credential}.get)
    exchange = SaslExchange(mechanism, "alice", "alice-secret")
    exchange.start()
    _, first = exchange.receive(handshake_ok())
    assert first["auth_bytes"].startswith(b"n,,n=alice,r=")
    _, final = exchange.receive(auth_ok(server.receive(first["auth_bytes"])))
    assert final["auth_bytes"].startswith(b"c=biws,r=")
    assert exchange.receive(auth_ok(server.receive(final["auth_bytes"]))) is None
    assert server.complete and server.username == "alice" and exchange.complete


def test_a_wrong_password_surfaces_the_brokers_message():
    mech = MECHANISMS["SCRAM-SHA-256"]
    server = ScramServer(mech, {"alice": make_credential(mech, "right")}.get)
    exchange = SaslExchange("SCRAM-SHA-256", "alice", "wrong")
    exchange.start()
    _, first = exchange.receive(handshake_ok())
    _, final = exchange.receive(auth_ok(server.receive(first["auth_bytes"])))
    with pytest.raises(ScramError) as refused:
        server.receive(final["auth_bytes"])
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials") as exc:
        exchange.receive(auth_failed(str(refused.value)))
    assert not exc.value.retriable
    with pytest.raises(Exception, match="no answer is expected"):
        exchange.receive(auth_ok(b""))


def test_a_server_that_does_not_know_the_password_is_refused():
    """The server-final signature proves the broker holds the credential."""
    mech = MECHANISMS["SCRAM-SHA-512"]
    impostor = ScramServer(mech, lambda user: make_credential(mech, "another password"))
    exchange = SaslExchange("SCRAM-SHA-512", "alice", "another password")
    exchange.start()
    _, first = exchange.receive(handshake_ok())
    _, final = exchange.receive(auth_ok(impostor.receive(first["auth_bytes"])))
    impostor.receive(final["auth_bytes"])
    with pytest.raises(SaslAuthenticationFailedError, match="signature is wrong"):
        exchange.receive(auth_ok(b"v=" + b"A" * 88))


def test_an_unsupported_mechanism_names_the_enabled_ones():
    exchange = SaslExchange("SCRAM-SHA-512", "alice", "pw")
    exchange.start()
    with pytest.raises(UnsupportedSaslMechanismError, match="enabled: PLAIN"):
        exchange.receive({"error_code": 33, "mechanisms": ["PLAIN"]})
    # A successful handshake that does not list ours fails the same way.
    exchange = SaslExchange("SCRAM-SHA-512", "alice", "pw")
    exchange.start()
    with pytest.raises(UnsupportedSaslMechanismError):
        exchange.receive(handshake_ok(["PLAIN", "SCRAM-SHA-256"]))
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslExchange("GSSAPI", "alice", "pw")


# -- whole exchanges against the broker's side, bytes through both framings --

NOW_MS = 1_000_000
REAUTH_MS = 60_000
VERSIONS = {SASL_HANDSHAKE: 1, SASL_AUTHENTICATE: 2}


class BrokerSide:
    """Request frames in, answer frames out: the SaslHandshake and SaslAuthenticate
    handlers' part, the decisions all the authenticator's."""

    def __init__(self, passwords: dict[str, str], mechanisms=ENABLED) -> None:
        credentials = {
            name: {user: make_credential(mech, pw) for user, pw in passwords.items()}
            for name, mech in MECHANISMS.items()
        }
        servers = {
            "PLAIN": lambda: PlainServer(passwords.get),
            **{
                name: (lambda mech=mech, known=credentials[name]: ScramServer(mech, known.get))
                for name, mech in MECHANISMS.items()
            },
        }
        settings = SaslSettings({m: servers[m] for m in mechanisms}, reauth_ms=REAUTH_MS)
        self.session = SimpleNamespace(principal="User:ANONYMOUS", closing=None)
        self.authenticator = SaslAuthenticator(settings, self.session)

    def answer(self, frame: bytes) -> bytes:
        header, body = decode_request(frame[4:])
        assert self.authenticator.admit(header.api_key, NOW_MS) is None
        if header.api_key == SASL_HANDSHAKE:
            answer = self.authenticator.handshake(body["mechanism"], header.api_version)
        else:
            answer = self.authenticator.authenticate(body["auth_bytes"], header.api_version, NOW_MS)
        parts = encode_response(
            header.api_key, header.api_version, header.correlation_id, asdict(answer)
        )
        return b"".join(parts)


def authenticate(exchange: SaslExchange, broker: BrokerSide) -> int:
    """Run the exchange to its end; the number of requests it took."""
    conn = ClientConnection("broker:9093", "test")
    request, sent = exchange.start(), 0
    while request is not None:
        api_key, body = request
        _, frame = conn.send_request(api_key, VERSIONS[api_key], body)
        answer = broker.answer(frame)
        for i in range(0, len(answer), 7):  # in pieces, as a socket may deliver them
            conn.receive_data(answer[i : i + 7])
        request = exchange.receive(conn.next_response().body)
        sent += 1
    assert len(conn) == 0
    return sent


@pytest.mark.parametrize(
    ("mechanism", "requests"), [("PLAIN", 2), ("SCRAM-SHA-256", 3), ("SCRAM-SHA-512", 3)]
)
def test_an_exchange_with_the_brokers_authenticator(mechanism, requests):
    broker = BrokerSide({"alice": "alice-secret"})
    exchange = SaslExchange(mechanism, "alice", "alice-secret")
    assert authenticate(exchange, broker) == requests
    assert exchange.complete and exchange.session_lifetime_ms == REAUTH_MS
    assert broker.authenticator.state is State.AUTHENTICATED
    assert broker.session.principal == "User:alice" and broker.session.closing is None


def test_re_authentication_runs_the_same_exchange_again():
    broker = BrokerSide({"alice": "alice-secret"})
    authenticate(SaslExchange("SCRAM-SHA-256", "alice", "alice-secret"), broker)
    again = SaslExchange("SCRAM-SHA-256", "alice", "alice-secret")
    assert authenticate(again, broker) == 3 and again.complete
    assert broker.authenticator.authenticated


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_the_authenticators_refusal(mechanism):
    broker = BrokerSide({"alice": "alice-secret"})
    with pytest.raises(SaslAuthenticationFailedError, match="Authentication failed") as exc:
        authenticate(SaslExchange(mechanism, "alice", "nope"), broker)
    assert not exc.value.retriable
    assert broker.authenticator.failed and broker.session.closing


def test_a_mechanism_the_listener_does_not_enable():
    broker = BrokerSide({"alice": "alice-secret"}, mechanisms=["SCRAM-SHA-512"])
    with pytest.raises(UnsupportedSaslMechanismError, match=r"enabled: SCRAM-SHA-512\)"):
        authenticate(SaslExchange("PLAIN", "alice", "alice-secret"), broker)
    assert broker.authenticator.failed
