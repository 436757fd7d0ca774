"""Real clients over TLS and SASL: confluent-kafka, kafka-python and kcat produce and
consume over SASL_SSL (SCRAM-SHA-512 and PLAIN) and over SSL with client certificates;
failures get their error and a closed connection while other clients keep working; a
stalled TLS handshake holds no one; the passwords never reach the broker's log.

One broker serves every listener at once (which is also the test that each listener's
clients are served independently): PLAINTEXT (readiness), SASL_SSL, SSL with client
certificates required and a principal mapping rule.
"""

from __future__ import annotations

import itertools
import json
import socket
import ssl
import struct
import subprocess
import time
import uuid

import kafka
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from broker.processes import BrokerProcess, free_port
from broker.protocol.apis import API_VERSIONS, METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import decode_response, encode_request
from broker.security.credentials import user_entry
from broker.security.scram import MECHANISMS, make_credential
from tests.helpers.certs import TestCA
from tests.helpers.cluster import wait_for
from tests.helpers.fetch_limits import load
from tests.helpers.metrics import scrape
from tests.helpers.wire import recv_exact

PASSWORDS = {"alice": "alice-scram-pw-7", "bob": "bob-plain-pw-3", "admin": "admin-plain-pw-5"}
WRONG = "not-the-pw-9"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="admin" password="{PASSWORDS["admin"]}" '
    f'user_admin="{PASSWORDS["admin"]}" user_bob="{PASSWORDS["bob"]}";'
)
# The user of each mechanism: SCRAM users live in the credentials file, PLAIN users in the
# listener's JAAS config.
USERS = {"SCRAM-SHA-512": "alice", "PLAIN": "bob"}


class SecureBroker:
    def __init__(self, work, **overrides: str) -> None:
        self.ca = TestCA(work / "ca")
        server = self.ca.issue("broker", hosts=["127.0.0.1", "localhost"])
        self.client_cert = self.ca.issue("alice", organization="corp", unit="eng")
        credentials = work / "scram.json"
        alice = {m: make_credential(MECHANISMS[m], PASSWORDS["alice"]) for m in MECHANISMS}
        credentials.write_text(json.dumps({"alice": user_entry(alice)}))
        self.plain_port, self.sasl_port, self.ssl_port = free_port(), free_port(), free_port()
        self.metrics_url = f"http://127.0.0.1:{(metrics_port := free_port())}/metrics"
        self.sasl_plaintext_port = free_port()
        self.process = BrokerProcess(
            work / "logs",
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{self.plain_port},"
                f"SASL_SSL://127.0.0.1:{self.sasl_port},SSL://127.0.0.1:{self.ssl_port},"
                f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_plaintext_port}",
                "ssl.keystore.location": str(server.keystore),
                "ssl.truststore.location": str(self.ca.pem),
                "listener.name.ssl.ssl.client.auth": "required",
                "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=.*$/$1/L",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                "sasl.scram.credentials.file": str(credentials),
                "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
                "num.partitions": "1",
                "metrics.port": str(metrics_port),
                **overrides,
            },
            port=self.plain_port,
        )

    def sasl(self, mechanism: str, password: str | None = None) -> dict:
        """librdkafka's settings for the SASL_SSL listener."""
        user = USERS[mechanism]
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password or PASSWORDS[user],
            "ssl.ca.location": str(self.ca.pem),
        }

    def tls(self) -> dict:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.ssl_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca.pem),
            "ssl.certificate.location": str(self.client_cert.cert),
            "ssl.key.location": str(self.client_cert.key),
        }


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    b = SecureBroker(tmp_path_factory.mktemp("secure"))
    with b.process:
        yield b


def _topic() -> str:
    return f"sec-{uuid.uuid4().hex[:8]}"


def confluent_round_trip(conf: dict, count: int = 20) -> list[bytes]:
    topic = _topic()
    producer = Producer({**conf, "message.timeout.ms": 20000})
    failures = []
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda e, m: e and failures.append(e))
    assert producer.flush(30) == 0 and not failures, failures
    consumer = Consumer({**conf, "group.id": "g-" + topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert not msg.error(), msg.error()
            got.append(msg.value())
    consumer.close()
    return got


def kafka_python_conf(secure: SecureBroker, mechanism: str | None) -> dict:
    if mechanism is None:  # SSL with the client certificate
        return {
            "bootstrap_servers": f"127.0.0.1:{secure.ssl_port}",
            "security_protocol": "SSL",
            "ssl_cafile": str(secure.ca.pem),
            "ssl_certfile": str(secure.client_cert.cert),
            "ssl_keyfile": str(secure.client_cert.key),
        }
    user = USERS[mechanism]
    return {
        "bootstrap_servers": f"127.0.0.1:{secure.sasl_port}",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user],
        "ssl_cafile": str(secure.ca.pem),
    }


def kafka_python_round_trip(conf: dict, count: int = 20) -> list[bytes]:
    topic = _topic()
    producer = KafkaProducer(**conf)
    sent = [producer.send(topic, f"m{i}".encode()) for i in range(count)]
    for future in sent:
        future.get(timeout=30)  # raises what the producer met
    producer.close()
    consumer = KafkaConsumer(
        **conf, auto_offset_reset="earliest", consumer_timeout_ms=15000, group_id=None
    )
    consumer.assign([kafka.TopicPartition(topic, 0)])
    got = [m.value for m in itertools.islice(consumer, count)]
    consumer.close()
    return got


def kcat(args: dict, *rest: str, stdin: bytes | None = None) -> bytes:
    command = ["kcat", "-b", args["bootstrap.servers"], "-q"]
    for key, value in args.items():
        if key != "bootstrap.servers":
            command += ["-X", f"{key.replace('sasl.mechanism', 'sasl.mechanisms')}={value}"]
    done = subprocess.run(
        [*command, *rest], input=stdin, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def kcat_round_trip(conf: dict, count: int = 20) -> list[bytes]:
    topic = _topic()
    lines = b"".join(f"m{i}\n".encode() for i in range(count))
    kcat(conf, "-P", "-t", topic, stdin=lines)
    out = kcat(conf, "-C", "-t", topic, "-o", "beginning", "-c", str(count), "-e")
    return out.split()


EXPECTED = [f"m{i}".encode() for i in range(20)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_over_sasl_ssl(secure, mechanism):
    assert confluent_round_trip(secure.sasl(mechanism)) == EXPECTED


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_over_sasl_ssl(secure, mechanism):
    assert kafka_python_round_trip(kafka_python_conf(secure, mechanism)) == EXPECTED


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kcat_over_sasl_ssl(secure, mechanism):
    assert kcat_round_trip(secure.sasl(mechanism)) == EXPECTED


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_and_kafka_python_over_sasl_plaintext(secure, mechanism):
    conf = {
        **secure.sasl(mechanism),
        "bootstrap.servers": f"127.0.0.1:{secure.sasl_plaintext_port}",
        "security.protocol": "SASL_PLAINTEXT",
    }
    del conf["ssl.ca.location"]
    assert confluent_round_trip(conf) == EXPECTED
    python_conf = {
        **kafka_python_conf(secure, mechanism),
        "bootstrap_servers": f"127.0.0.1:{secure.sasl_plaintext_port}",
        "security_protocol": "SASL_PLAINTEXT",
    }
    del python_conf["ssl_cafile"]
    assert kafka_python_round_trip(python_conf) == EXPECTED


def test_confluent_over_ssl_with_a_client_certificate(secure):
    assert confluent_round_trip(secure.tls()) == EXPECTED


def test_kafka_python_over_ssl_with_a_client_certificate(secure):
    assert kafka_python_round_trip(kafka_python_conf(secure, None)) == EXPECTED


def test_kcat_over_ssl_with_a_client_certificate(secure):
    assert kcat_round_trip(secure.tls()) == EXPECTED


def test_ssl_without_a_client_certificate_is_refused(secure):
    context = ssl.create_default_context(cafile=str(secure.ca.pem))
    with socket.create_connection(("127.0.0.1", secure.ssl_port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                # TLS 1.3 reports the refusal at the first read, not in the handshake.
                tls.sendall(encode_request(API_VERSIONS, 3, 1, "t", {}))
                assert tls.recv(4096) == b""
        except (ssl.SSLError, ConnectionResetError):
            pass


def test_metadata_answers_the_endpoints_of_the_listener_asked(secure):
    for port, context in ((secure.plain_port, None), (secure.sasl_port, "sasl")):
        with _connect(secure, port, tls=context is not None) as conn:
            if context:
                _authenticate_plain(conn, "bob", PASSWORDS["bob"])
            body = _call(conn, METADATA, 9, {"topics": [], "allow_auto_topic_creation": False})
            assert [(b["host"], b["port"]) for b in body["brokers"]] == [("127.0.0.1", port)]


# -- failures ----------------------------------------------------------------------------
def _connect(secure: SecureBroker, port: int, tls: bool = True) -> socket.socket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    if not tls:
        return raw
    context = ssl.create_default_context(cafile=str(secure.ca.pem))
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


_correlation = iter(range(1, 1 << 30))


def _call(conn: socket.socket, api_key: int, version: int, body: dict) -> dict:
    cid = next(_correlation)
    conn.sendall(encode_request(api_key, version, cid, "sec-test", body))
    size = struct.unpack(">i", recv_exact(conn, 4))[0]
    got, answer = decode_response(api_key, version, recv_exact(conn, size))
    assert got == cid
    return answer


def _closed(conn: socket.socket) -> bool:
    try:
        return conn.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def _authenticate_plain(conn, user: str, password: str) -> dict:
    assert _call(conn, SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    token = f"\0{user}\0{password}".encode()
    return _call(conn, SASL_AUTHENTICATE, 2, {"auth_bytes": token})


@pytest.mark.parametrize(("user", "password"), [("bob", WRONG), ("mallory", WRONG)])
def test_wrong_password_and_unknown_user_fail_and_close(secure, user, password):
    producer = Producer({**secure.sasl("SCRAM-SHA-512"), "message.timeout.ms": 20000})
    producer.produce(_topic(), b"before")
    assert producer.flush(30) == 0
    failures = _failures(secure)
    with _connect(secure, secure.sasl_port) as conn:
        answer = _authenticate_plain(conn, user, password)
        assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert answer["error_message"] == "Authentication failed: Invalid username or password"
        assert _closed(conn)
    producer.produce(_topic(), b"after")  # the authenticated client was not disturbed
    assert producer.flush(30) == 0
    # The operator sees it: one more failed authentication on that listener and mechanism.
    wait_for(lambda: _failures(secure) == failures + 1, "the failure counted", timeout_s=10)
    assert scrape(secure.metrics_url).value("kafka_network_connections", listener="SASL_SSL") >= 1


def _failures(secure) -> float:
    return scrape(secure.metrics_url).value(
        "kafka_authentication_failures_total", 0.0, listener="SASL_SSL", mechanism="PLAIN"
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_with_a_wrong_password_gets_an_authentication_error(secure, mechanism):
    errors = []
    producer = Producer(
        {**secure.sasl(mechanism, WRONG), "error_cb": errors.append, "message.timeout.ms": 3000}
    )
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()


def test_garbage_instead_of_a_handshake_closes_only_that_connection(secure):
    with _connect(secure, secure.sasl_port) as conn:
        conn.sendall(b"\x00\x00\x00\x08garbage!")
        assert _closed(conn)
    with _connect(secure, secure.sasl_port) as conn:  # a request before authenticating
        conn.sendall(encode_request(METADATA, 9, 1, "t", {"topics": []}))
        assert _closed(conn)
    with _connect(secure, secure.sasl_port, tls=False) as conn:  # not even TLS
        conn.sendall(b"\x00\x00\x00\x0aApiVersion")
        assert _closed(conn)
    assert confluent_round_trip(secure.sasl("PLAIN"), count=3) == EXPECTED[:3]


def test_a_stalled_tls_handshake_does_not_block_other_connections(secure):
    stalled = [socket.create_connection(("127.0.0.1", secure.sasl_port)) for _ in range(3)]
    half = socket.create_connection(("127.0.0.1", secure.ssl_port))
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
    try:
        assert confluent_round_trip(secure.sasl("SCRAM-SHA-512"), count=3) == EXPECTED[:3]
        assert confluent_round_trip(secure.tls(), count=3) == EXPECTED[:3]
    finally:
        for s in [*stalled, half]:
            s.close()


def test_passwords_never_reach_the_log(secure):
    # Run after the other tests of the module: successes, failures and refusals alike.
    with _connect(secure, secure.sasl_port) as conn:
        _authenticate_plain(conn, "bob", WRONG)
    text = secure.process.log_text()
    assert "Authentication failed" in text  # the failures are logged ...
    for secret in [*PASSWORDS.values(), WRONG]:
        assert secret not in text  # ... without a password


def test_clients_reauthenticate_within_the_session_lifetime(tmp_path):
    """KIP-368: with connections.max.reauth.ms, librdkafka and kafka-python re-authenticate
    on their open connections; none is closed for an expired session while they work."""
    b = SecureBroker(tmp_path, **{"connections.max.reauth.ms": "1500"})
    with b.process:
        topic = _topic()
        producer = Producer({**b.sasl("SCRAM-SHA-512"), "acks": "all"})
        python_producer = KafkaProducer(**kafka_python_conf(b, "PLAIN"))
        failures, sent = [], []
        deadline = time.monotonic() + 6  # four session lifetimes
        while time.monotonic() < deadline:
            producer.produce(topic, b"r", on_delivery=lambda e, m: e and failures.append(e))
            producer.poll(0.1)
            sent.append(python_producer.send(topic, b"p"))
            time.sleep(0.1)
        assert producer.flush(30) == 0 and not failures, failures
        for future in sent:
            future.get(timeout=30)
        python_producer.close()
        log = b.process.log_text()
    assert "expired without re-authentication" not in log
    assert "closing connection" not in log


def test_fetch_limits_hold_over_tls(secure):
    """The TLS path copies file regions instead of sendfile: the same answers, so
    librdkafka with receive.message.max.bytes = fetch.max.bytes + 512 reads partitions
    holding many times that, batches over max.partition.fetch.bytes included
    (docs/contracts/fetch.md)."""
    topic = _topic()
    layout = {0: [1_000] * 20 + [7_000] * 3, 1: [9_000, 500] * 10}
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{secure.plain_port}"})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)
    sent = load("127.0.0.1", secure.plain_port, topic, layout)
    problems: list[str] = []
    consumer = Consumer(
        {
            **secure.tls(),
            "group.id": "g-" + topic,
            "enable.auto.commit": False,
            "fetch.max.bytes": 10_000,
            "receive.message.max.bytes": 10_512,
            "message.max.bytes": 10_000,
            "max.partition.fetch.bytes": 4_000,
            "error_cb": lambda err: problems.append(str(err)),
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in layout])
    got: dict[int, list[bytes]] = {p: [] for p in layout}
    deadline = time.monotonic() + 30
    try:
        while sum(map(len, got.values())) < sum(map(len, sent.values())) and not problems:
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    assert problems == [] and got == sent
