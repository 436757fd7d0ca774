"""The SASL state machine, driven by request frames through the dispatcher (no socket):
what each state admits, PLAIN and SCRAM over SaslHandshake v1 + SaslAuthenticate and over
v0's bare tokens, failures answered then closed, re-authentication and expiry."""

from __future__ import annotations

import json
import struct

import pytest

from broker.protocol.apis import API_VERSIONS, METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE
from broker.protocol.errors import ErrorCode
from broker.security.authenticator import ADMITS, TRANSITIONS, State
from broker.security.credentials import user_entry
from broker.security.listener import listener_security
from broker.security.scram import MECHANISMS, ScramClient, make_credential
from broker.server.request import ANONYMOUS, Session
from tests.helpers.inprocess_broker import Close, InProcessBroker, Respond, response_bytes

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";'
)
LISTENER = "SASL_PLAINTEXT"


@pytest.fixture
def broker(tmp_path):
    credentials = tmp_path / "scram.json"
    alice = {m: make_credential(MECHANISMS[m], "alice-secret") for m in MECHANISMS}
    carol = {m: make_credential(MECHANISMS[m], "carol-secret") for m in MECHANISMS}
    credentials.write_text(json.dumps({"alice": user_entry(alice), "carol": user_entry(carol)}))
    b = InProcessBroker(
        tmp_path / "logs",
        listeners=f"{LISTENER}://127.0.0.1:0",
        **{
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "sasl.scram.credentials.file": str(credentials),
            "connections.max.reauth.ms": "60000",
        },
    )
    security = listener_security(b.state.config, LISTENER, b.state.credentials)
    b.session = Session(LISTENER, "127.0.0.1", 50000, "SASL_PLAINTEXT")
    b.session.authenticator = security.authenticator(b.session)
    yield b
    b.close()


def handshake(b, mechanism: str, version: int = 1) -> dict:
    return b.call(SASL_HANDSHAKE, version, {"mechanism": mechanism})


def authenticate(b, token: bytes, version: int = 2) -> tuple[dict, Respond]:
    outcome = b.send(SASL_AUTHENTICATE, version, {"auth_bytes": token})
    assert isinstance(outcome, Respond), outcome
    return b.decode(SASL_AUTHENTICATE, version, outcome), outcome


def plain(b, user: str, password: str) -> tuple[dict, Respond]:
    assert handshake(b, "PLAIN")["error_code"] == ErrorCode.NONE
    return authenticate(b, f"\0{user}\0{password}".encode())


def scram(b, mechanism: str, user: str, password: str) -> tuple[dict, Respond]:
    assert handshake(b, mechanism)["error_code"] == ErrorCode.NONE
    client = ScramClient(MECHANISMS[mechanism], user, password)
    first, _ = authenticate(b, client.first_message())
    assert first["error_code"] == ErrorCode.NONE, first
    final, outcome = authenticate(b, client.final_message(first["auth_bytes"]))
    if final["error_code"] == ErrorCode.NONE:
        client.verify(final["auth_bytes"])
    return final, outcome


def metadata(b):
    return b.send(METADATA, 9, {"topics": [], "allow_auto_topic_creation": False})


def test_the_table_names_every_state():
    assert set(ADMITS) == set(State)
    assert {s for s, _ in TRANSITIONS} | set(TRANSITIONS.values()) <= set(State)
    assert ADMITS[State.AUTHENTICATED] is None  # everything, once authenticated


def test_only_api_versions_and_handshake_before_authentication(broker):
    assert broker.call(API_VERSIONS, 3, {})["error_code"] == ErrorCode.NONE
    outcome = metadata(broker)
    assert isinstance(outcome, Close)
    assert "Metadata is not allowed" in outcome.reason
    assert broker.session.principal == ANONYMOUS


def test_plain_authenticates_and_then_every_api_is_served(broker):
    answer, outcome = plain(broker, "bob", "bob-secret")
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["auth_bytes"] == b""
    assert answer["session_lifetime_ms"] == 60000
    assert outcome.close is None
    assert broker.session.principal == "User:bob"
    assert isinstance(metadata(broker), Respond)


def test_handshake_lists_the_enabled_mechanisms(broker):
    assert handshake(broker, "PLAIN")["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "bob-secret")])
def test_plain_failure_is_answered_then_closed(broker, user, password):
    answer, outcome = plain(broker, user, password)
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer["error_message"] == "Authentication failed: Invalid username or password"
    assert outcome.close is not None
    assert broker.session.principal == ANONYMOUS
    assert isinstance(metadata(broker), Close)


def test_plain_refuses_another_authorization_id(broker):
    assert handshake(broker, "PLAIN")["error_code"] == ErrorCode.NONE
    answer, outcome = authenticate(broker, b"admin\0bob\0bob-secret")
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert outcome.close is not None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_with_the_file_credentials(broker, mechanism):
    answer, outcome = scram(broker, mechanism, "alice", "alice-secret")
    assert answer["error_code"] == ErrorCode.NONE
    assert outcome.close is None
    assert broker.session.principal == "User:alice"
    assert isinstance(metadata(broker), Respond)


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "x")])
def test_scram_failure_is_answered_then_closed(broker, user, password):
    assert handshake(broker, "SCRAM-SHA-512")["error_code"] == ErrorCode.NONE
    client = ScramClient(MECHANISMS["SCRAM-SHA-512"], user, password)
    answer, outcome = authenticate(broker, client.first_message())
    if answer["error_code"] == ErrorCode.NONE:  # a known user fails at the proof
        answer, outcome = authenticate(broker, client.final_message(answer["auth_bytes"]))
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials" in answer["error_message"]
    assert outcome.close is not None


def test_unknown_mechanism_is_refused_with_the_list_then_closed(broker):
    outcome = broker.send(SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
    answer = broker.decode(SASL_HANDSHAKE, 1, outcome)
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert answer["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert outcome.close is not None


def test_authenticate_before_handshake_closes(broker):
    assert isinstance(broker.send(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0bob\0x"}), Close)


def test_garbage_instead_of_a_request_closes(broker):
    assert isinstance(broker.outcome(b"\xff\xff\x00"), Close)
    assert isinstance(broker.outcome(b"GET / HTTP/1.1\r\n\r\n"), Close)


def raw(broker, token: bytes):
    """A bare token frame (after SaslHandshake v0) and the bare token answered."""
    outcome = broker.outcome(token)
    if isinstance(outcome, Close):
        return outcome
    data = b"".join(bytes(p) for p in outcome.parts)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return data[4:]


def test_handshake_v0_then_bare_plain_token(broker):
    assert handshake(broker, "PLAIN", version=0)["error_code"] == ErrorCode.NONE
    assert raw(broker, b"\0bob\0bob-secret") == b""
    assert broker.session.principal == "User:bob"
    assert isinstance(metadata(broker), Respond)


def test_handshake_v0_then_bare_scram_tokens(broker):
    assert handshake(broker, "SCRAM-SHA-256", version=0)["error_code"] == ErrorCode.NONE
    client = ScramClient(MECHANISMS["SCRAM-SHA-256"], "alice", "alice-secret")
    server_first = raw(broker, client.first_message())
    client.verify(raw(broker, client.final_message(server_first)))
    assert broker.session.principal == "User:alice"


def test_bare_token_failure_just_closes(broker):
    assert handshake(broker, "PLAIN", version=0)["error_code"] == ErrorCode.NONE
    assert isinstance(raw(broker, b"\0bob\0wrong"), Close)
    assert isinstance(metadata(broker), Close)


def test_reauthentication_keeps_the_principal(broker):
    plain(broker, "bob", "bob-secret")
    answer, outcome = plain(broker, "bob", "bob-secret")
    assert answer["error_code"] == ErrorCode.NONE and outcome.close is None
    assert isinstance(metadata(broker), Respond)


def test_reauthentication_as_another_principal_fails(broker):
    plain(broker, "bob", "bob-secret")
    answer, outcome = plain(broker, "admin", "admin-secret")
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "different principal" in answer["error_message"]
    assert outcome.close is not None
    assert broker.session.principal == "User:bob"


def test_reauthentication_with_another_mechanism_fails(broker):
    plain(broker, "bob", "bob-secret")
    outcome = broker.send(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
    answer = broker.decode(SASL_HANDSHAKE, 1, outcome)
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert outcome.close is not None


def test_a_session_past_its_lifetime_closes_at_its_next_request(broker):
    plain(broker, "bob", "bob-secret")
    broker.clock.now += 59_999
    assert isinstance(metadata(broker), Respond)
    broker.clock.now += 1
    outcome = metadata(broker)
    assert isinstance(outcome, Close)
    assert "expired" in outcome.reason


def test_reauthenticating_in_time_extends_the_session(broker):
    plain(broker, "bob", "bob-secret")
    broker.clock.now += 50_000
    plain(broker, "bob", "bob-secret")
    broker.clock.now += 50_000
    assert isinstance(metadata(broker), Respond)


def test_saslauthenticate_v0_without_session_lifetime(broker):
    assert handshake(broker, "PLAIN")["error_code"] == ErrorCode.NONE
    outcome = broker.send(SASL_AUTHENTICATE, 0, {"auth_bytes": b"\0bob\0bob-secret"})
    answer = broker.decode(SASL_AUTHENTICATE, 0, outcome)
    assert answer["error_code"] == ErrorCode.NONE
    assert broker.session.principal == "User:bob"


def test_a_plaintext_listener_answers_sasl_with_illegal_state(tmp_path):
    b = InProcessBroker(tmp_path / "logs")
    try:
        outcome = b.send(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        answer = b.decode(SASL_HANDSHAKE, 1, outcome)
        assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert isinstance(metadata(b), Respond)  # nothing else changes
    finally:
        b.close()


def test_response_frames_are_well_formed(broker):
    outcome = broker.send(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    response_bytes(outcome.parts)  # size prefix checked
