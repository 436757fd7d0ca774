"""SCRAM pushed through both state machines, no socket: RFC 7677's published exchange,
the two mechanisms end to end, and every way a client can get it wrong."""

import base64

import pytest

from broker.security.scram import (
    MECHANISMS,
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    make_credential,
    salted_password,
)

SHA256 = MECHANISMS["SCRAM-SHA-256"]
SHA512 = MECHANISMS["SCRAM-SHA-512"]

# RFC 7677 section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential():
    return make_credential(SHA256, "pencil", salt=RFC_SALT, iterations=4096)


def test_rfc7677_exchange_both_halves():
    client = ScramClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    server = ScramServer(SHA256, {"user": rfc_credential()}.get, nonce=RFC_SERVER_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert server.receive(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert server.receive(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    client.verify(RFC_SERVER_FINAL)
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mech", [SHA256, SHA512])
def test_round_trip_with_odd_user_names(mech):
    user = "a,b=c"
    cred = make_credential(mech, "s3cret")
    client = ScramClient(mech, user, "s3cret")
    server = ScramServer(mech, {user: cred}.get)
    final = server.receive(client.final_message(server.receive(client.first_message())))
    client.verify(final)
    assert server.username == user


def test_stored_form_round_trips():
    cred = make_credential(SHA512, "pw", iterations=8192)
    text = cred.to_config()
    assert text.startswith("salt=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_config(text) == cred


def _exchange_until_final(mech, password_known, password_used):
    cred = make_credential(mech, password_known)
    client = ScramClient(mech, "alice", password_used)
    server = ScramServer(mech, {"alice": cred}.get)
    return client, server, client.final_message(server.receive(client.first_message()))


def test_wrong_password_fails_with_the_generic_message():
    _, server, final = _exchange_until_final(SHA256, "right", "wrong")
    with pytest.raises(ScramError, match="invalid credentials"):
        server.receive(final)
    assert not server.complete
    with pytest.raises(ScramError):  # a failed exchange stays failed
        server.receive(final)


def test_unknown_user_fails_like_a_wrong_password():
    server = ScramServer(SHA256, {}.get)
    with pytest.raises(ScramError, match="invalid credentials"):
        server.receive(ScramClient(SHA256, "nobody", "x").first_message())


def test_client_detects_a_server_without_the_password():
    client, _, _ = _exchange_until_final(SHA256, "right", "right")
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))


@pytest.mark.parametrize(
    "first",
    [
        b"",
        b"\xff\xfe",
        b"p=tls-unique,,n=alice,r=abc",
        b"n,,r=abc,n=alice",
        b"n,,n=alice",
        b"n,a=bob,n=alice,r=abc",
        b"n,,n=al=ce,r=abc",
        b"n,,n=alice,r=abc,t=tokenauth",
        b"garbage",
    ],
)
def test_malformed_client_first_is_refused(first):
    server = ScramServer(SHA256, {"alice": make_credential(SHA256, "pw")}.get)
    with pytest.raises(ScramError):
        server.receive(first)


def test_tampered_final_is_refused():
    cred = make_credential(SHA512, "pw")

    def fresh():  # the same nonces every time, so only the tampering differs
        client = ScramClient(SHA512, "alice", "pw", nonce="cnonce")
        server = ScramServer(SHA512, {"alice": cred}.get, nonce="snonce")
        return server, client.final_message(server.receive(client.first_message()))

    _, final = fresh()
    for bad in (
        final.replace(b"c=biws", b"c=eSws"),
        final.replace(b"r=cnonce", b"r=xcnonce"),
        final.rpartition(b",p=")[0],
        final.rpartition(b",p=")[0] + b",p=!!!",
        final[:-6] + b"AAAA==",
    ):
        server, _ = fresh()
        with pytest.raises(ScramError):
            server.receive(bad)
    server, _ = fresh()
    assert server.receive(final).startswith(b"v=")


def test_client_refuses_a_bad_server_first():
    client = ScramClient(SHA256, "alice", "pw", nonce="abc")
    for bad in (
        b"r=xyz,s=AAAA,i=4096",
        b"r=abc,s=AAAA,i=4096",
        b"r=abcd,s=AAAA,i=99",
        b"r=abcd,s=AAAA,i=2000000",
        b"m=ext,r=abcd,s=AAAA,i=4096",
    ):
        with pytest.raises(ScramError):
            client.final_message(bad)


def test_iterations_bounds_for_stored_credentials():
    with pytest.raises(ScramError, match="iterations"):
        make_credential(SHA256, "pw", iterations=1000)
    with pytest.raises(ScramError, match="iterations"):
        make_credential(SHA256, "pw", iterations=100_000)


def _final_with(mech, password: str, client_first_bare: str, server_first: str, nonce: str):
    """A client-final message with the given nonce and the proof a client computes for it."""
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = salted_password(mech, password, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = mech.hmac(salted, b"Client Key")
    without_proof = f"c=biws,r={nonce}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = mech.hmac(mech.digest(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize(
    ("nonce", "accepted"),
    [
        ("cnoncesnonce", True),  # RFC 5802
        ("cnoncecnoncesnonce", True),  # librdkafka before 2.6.1 (kcat's 2.0.2)
        ("xcnoncesnonce", False),  # any other prefix, as a suffix match would allow
        ("cnoncecnoncecnoncesnonce", False),
    ],
)
def test_final_nonce_of_old_librdkafka_is_accepted_and_nothing_looser(nonce, accepted):
    server = ScramServer(SHA512, {"alice": make_credential(SHA512, "pw")}.get, nonce="snonce")
    server_first = server.receive(b"n,,n=alice,r=cnonce").decode()
    final = _final_with(SHA512, "pw", "n=alice,r=cnonce", server_first, nonce)
    if accepted:
        assert server.receive(final).startswith(b"v=")
    else:
        with pytest.raises(ScramError, match="nonce"):
            server.receive(final)
