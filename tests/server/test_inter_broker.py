"""The broker's asyncio client for other brokers (broker/inter_broker/).

Against real broker processes for what a broker does (pipelined answers in order, long
polls, dying and restarting on the same or another port) and against an in-process
scripted peer for what a broker never does (closing mid-response, answering out of
order, stalling, refusing ApiVersions v3). Nothing waits on wall time: waits are bounded
by deadlines, and backoff is checked through the attempts made and the delays chosen.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import ssl
import subprocess

import pytest

from broker.cluster import Endpoint
from broker.inter_broker import (
    BrokerConnection,
    ChannelClosed,
    NodeClient,
    ReconnectBackoff,
    RequestChannel,
)
from broker.inter_broker.connection import check_security
from broker.inter_broker.security import InterBrokerSecurity
from broker.processes import BrokerProcess, free_port
from broker.protocol.apis import (
    API_VERSIONS,
    CREATE_TOPICS,
    FETCH,
    LEADER_AND_ISR,
    METADATA,
    PRODUCE,
)
from broker.protocol.errors import NetworkError, RequestTimedOutError, UnsupportedVersionError
from broker.protocol.framing import encode_api_versions_error
from broker.records.batch import iter_records
from tests.helpers.aio import run, until
from tests.helpers.scripted_peer import ScriptedPeer, answer_each
from tests.helpers.server_requests import fetch_body, produce_body, values


def plaintext(port: int) -> Endpoint:
    return Endpoint("PLAINTEXT", "127.0.0.1", port)


def metadata(name: str) -> dict:
    return {"topics": [{"name": name}], "allow_auto_topic_creation": False}


def named(answer: dict) -> str:
    return answer["topics"][0]["name"]


def echo_metadata(header, body) -> dict:
    return {"topics": [{"name": t["name"], "error_code": 3} for t in body["topics"]]}


async def connected(port: int, **kw) -> BrokerConnection:
    conn = BrokerConnection(plaintext(port), client_id="broker-9", **kw)
    await conn.connect(10)
    return conn


def node_at(endpoint: Endpoint, initial_ms: int = 50, max_ms: int = 1000, **kw) -> NodeClient:
    backoff = ReconnectBackoff(initial_ms=initial_ms, max_ms=max_ms, **kw)
    return NodeClient(1, endpoint, client_id="broker-9", backoff=backoff)


async def in_long_backoff() -> NodeClient:
    """A node whose one attempt was refused, so that it waits ten minutes for the next."""
    node = node_at(plaintext(free_port()), initial_ms=600_000, max_ms=600_000)
    with pytest.raises(NetworkError, match="cannot connect"):
        await node.request(METADATA, 8, metadata("a"), 10)
    return node


async def create_topic(conn: BrokerConnection, name: str) -> None:
    body = {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False,
    }  # fmt: skip
    answer = await conn.request(CREATE_TOPICS, 4, body, 10)
    assert answer["topics"][0]["error_code"] == 0, answer


def base_offset(answer: dict) -> int:
    (partition,) = answer["responses"][0]["partition_responses"]
    assert partition["error_code"] == 0, partition
    return partition["base_offset"]


@pytest.fixture(scope="module")
def real_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("inter-broker") / "logs") as b:
        yield b


# -- BrokerConnection against a real broker -------------------------------------------


def test_pipelined_requests_are_all_in_flight_and_matched_to_their_answers(real_broker):
    async def scenario():
        conn = await connected(real_broker.port)
        assert conn.api_versions[METADATA][1] >= 8  # the peer's ranges, from ApiVersions
        names = [f"missing-{i}" for i in range(30)]
        tasks = [asyncio.create_task(conn.request(METADATA, 8, metadata(n), 10)) for n in names]
        await asyncio.sleep(0)  # every task has written its frame before any answer is read
        assert conn.in_flight == 30
        answers = await asyncio.gather(*tasks)
        assert [named(a) for a in answers] == names
        assert conn.in_flight == 0 and not conn.closed
        conn.close()

    run(scenario())


def test_pipelined_produces_are_appended_in_the_order_sent(real_broker):
    async def scenario():
        conn = await connected(real_broker.port)
        await create_topic(conn, "ordered")
        batches = [values(f"v{i}".encode()) for i in range(10)]
        answers = await asyncio.gather(
            *(conn.request(PRODUCE, 8, produce_body("ordered", b), 10) for b in batches)
        )
        assert [base_offset(a) for a in answers] == list(range(10))
        fetched = await conn.request(FETCH, 11, fetch_body("ordered", 0), 10)
        records = fetched["responses"][0]["partitions"][0]["records"]
        assert [r.value for r in iter_records(records)] == [f"v{i}".encode() for i in range(10)]
        conn.close()

    run(scenario())


def test_a_long_poll_holds_the_requests_behind_it_and_they_are_answered_in_order(real_broker):
    async def scenario():
        conn = await connected(real_broker.port)
        producer = await connected(real_broker.port)
        await create_topic(producer, "long-poll")
        done: list[str] = []
        poll = asyncio.create_task(
            conn.request(FETCH, 11, fetch_body("long-poll", 0, max_wait_ms=30_000), 40)
        )
        behind = asyncio.create_task(conn.request(METADATA, 8, metadata("long-poll"), 40))
        poll.add_done_callback(lambda _: done.append("fetch"))
        behind.add_done_callback(lambda _: done.append("metadata"))
        await asyncio.sleep(0)
        assert conn.in_flight == 2 and done == []
        await producer.request(PRODUCE, 8, produce_body("long-poll", values(b"wake")), 10)
        fetched, meta = await asyncio.gather(poll, behind)
        assert done == ["fetch", "metadata"]
        records = fetched["responses"][0]["partitions"][0]["records"]
        assert [r.value for r in iter_records(records)] == [b"wake"]
        assert named(meta) == "long-poll"
        conn.close()
        producer.close()

    run(scenario())


def test_a_request_that_times_out_closes_the_connection_and_fails_those_behind_it(real_broker):
    async def scenario():
        conn = await connected(real_broker.port)
        await create_topic(conn, "quiet")
        poll = asyncio.create_task(
            conn.request(FETCH, 11, fetch_body("quiet", 0, max_wait_ms=60_000), 0.3)
        )
        behind = asyncio.create_task(conn.request(METADATA, 8, metadata("quiet"), 30))
        with pytest.raises(RequestTimedOutError, match="did not answer Fetch v11"):
            await poll
        with pytest.raises(NetworkError, match="Fetch v11 got no answer"):
            await behind
        assert conn.closed
        with pytest.raises(NetworkError, match="is closed"):
            await conn.request(METADATA, 8, metadata("quiet"), 5)

    run(scenario())


def test_a_broker_that_dies_fails_the_requests_in_flight(broker_factory):
    b = broker_factory()

    async def scenario():
        conn = await connected(b.port)
        await create_topic(conn, "doomed")
        poll = asyncio.create_task(
            conn.request(FETCH, 11, fetch_body("doomed", 0, max_wait_ms=60_000), 60)
        )
        await asyncio.sleep(0)
        await asyncio.to_thread(b.kill)
        with pytest.raises(NetworkError, match="closed"):
            await poll
        assert conn.closed

    run(scenario())


def test_connecting_to_a_port_nobody_listens_on_is_a_network_error():
    async def scenario():
        conn = BrokerConnection(plaintext(free_port()), client_id="broker-9")
        with pytest.raises(NetworkError, match="cannot connect to PLAINTEXT://127.0.0.1"):
            await conn.connect(5)
        assert conn.closed

    run(scenario())


# -- BrokerConnection against a scripted peer -----------------------------------------


async def half_an_answer(conn):
    header, body = await conn.next_request()
    await conn.next_request()
    frame = conn.response(header, echo_metadata(header, body))
    conn.write(frame[: len(frame) // 2])
    await conn.close()


async def reversed_answers(conn):
    first = await conn.next_request()
    second = await conn.next_request()
    for header, body in (second, first):
        conn.answer(header, echo_metadata(header, body))
    await conn.reader.read()  # hold the connection until the client closes it


async def absurd_frame_size(conn):
    await conn.next_request()
    conn.write((2**31 - 1).to_bytes(4, "big"))
    await conn.reader.read()


@pytest.mark.parametrize(
    "script, reason",
    [
        (half_an_answer, "the peer closed the connection"),
        (reversed_answers, "answered correlation id 2, expected 1 .* out of order"),
        (absurd_frame_size, "bad frame .* frame size 2147483647"),
    ],
)
def test_a_peer_breaking_the_stream_fails_every_request_in_flight(script, reason):
    async def scenario():
        async with ScriptedPeer(script) as peer:
            conn = await connected(peer.port, max_frame_bytes=1 << 20)
            results = await asyncio.gather(
                conn.request(METADATA, 8, metadata("a"), 10),
                conn.request(METADATA, 8, metadata("b"), 10),
                return_exceptions=True,
            )
            assert [type(r) for r in results] == [NetworkError, NetworkError]
            for r in results:
                assert re.search(f"closed: .*{reason}", str(r)), r
            assert conn.closed

    run(scenario())


def test_a_version_the_peer_does_not_serve_is_refused_before_anything_is_sent():
    offered = {API_VERSIONS: (0, 3), METADATA: (0, 8)}

    async def scenario():
        async with ScriptedPeer(
            lambda c: answer_each(c, echo_metadata), api_versions=offered
        ) as peer:
            conn = await connected(peer.port)
            with pytest.raises(UnsupportedVersionError, match="LeaderAndIsr v3 .*nothing"):
                await conn.request(LEADER_AND_ISR, 3, {}, 10)
            with pytest.raises(UnsupportedVersionError, match="Metadata v9 .*v0-v8"):
                await conn.request(METADATA, 9, metadata("a"), 10)
            assert not conn.closed and peer.requests == []
            assert named(await conn.request(METADATA, 8, metadata("a"), 10)) == "a"

    run(scenario())


async def old_peer(conn):
    header, _ = await conn.next_request()
    assert (header.api_key, header.api_version) == (API_VERSIONS, 3)
    conn.write(b"".join(encode_api_versions_error(header.correlation_id, {METADATA: (0, 5)})))
    await conn.reader.read()


async def silent(conn):
    await conn.reader.read()


async def hold_the_first(conn):
    """Take one request and never answer it."""
    await conn.next_request()
    await conn.reader.read()


@pytest.mark.parametrize(
    "script, error",
    [
        (old_peer, "refused ApiVersions v3 .UNSUPPORTED_VERSION.: not a broker of this"),
        (silent, "did not answer ApiVersions in time"),
    ],
)
def test_a_peer_that_does_not_answer_api_versions_v3_fails_the_connect(script, error):
    async def scenario():
        async with ScriptedPeer(script, api_versions=None) as peer:
            conn = BrokerConnection(peer.endpoint, client_id="broker-9")
            with pytest.raises(NetworkError, match=error):
                await conn.connect(0.5)
            assert conn.closed

    run(scenario())


def test_a_caller_that_gives_up_leaves_the_connection_usable():
    release = asyncio.Event()

    async def answer_when_released(conn):
        held = await conn.next_request()
        await release.wait()
        conn.answer(held[0], echo_metadata(*held))
        await answer_each(conn, echo_metadata)

    async def scenario():
        async with ScriptedPeer(answer_when_released) as peer:
            conn = await connected(peer.port)
            given_up = asyncio.create_task(conn.request(METADATA, 8, metadata("late"), 30))
            await until(lambda: len(peer.requests) == 1, "the peer holds the first request")
            given_up.cancel()
            release.set()
            # The late answer is read and dropped; the next one is matched to its request.
            assert named(await conn.request(METADATA, 8, metadata("next"), 10)) == "next"
            assert given_up.cancelled() and not conn.closed

    run(scenario())


def test_close_fails_the_requests_in_flight():
    async def scenario():
        async with ScriptedPeer(hold_the_first) as peer:
            conn = await connected(peer.port)
            pending = asyncio.create_task(conn.request(METADATA, 8, metadata("a"), 30))
            await until(lambda: len(peer.requests) == 1, "the request reached the peer")
            conn.close("the controller resigned")
            with pytest.raises(NetworkError, match="closed: the controller resigned"):
                await pending

    run(scenario())


def test_security_protocols():
    tls = ssl.create_default_context()
    with pytest.raises(ValueError, match="SASL_SSL but this broker connects with PLAINTEXT"):
        check_security(Endpoint("SECURE", "h", 1, "SASL_SSL"), InterBrokerSecurity())
    with pytest.raises(ValueError, match="needs a TLS context"):
        check_security(Endpoint("SSL", "h", 1, "SSL"), InterBrokerSecurity("SSL"))
    with pytest.raises(ValueError, match="PLAINTEXT but a TLS context"):
        check_security(plaintext(1), InterBrokerSecurity("PLAINTEXT", tls))
    with pytest.raises(ValueError, match="SASL credentials are needed"):
        check_security(Endpoint("S", "h", 1, "SASL_SSL"), InterBrokerSecurity("SASL_SSL", tls))
    sasl = InterBrokerSecurity("SASL_SSL", tls, "PLAIN", "broker", "secret")
    check_security(Endpoint("S", "h", 1, "SASL_SSL"), sasl)
    assert "secret" not in repr(sasl)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_an_ssl_endpoint_is_reached_over_tls(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    client_side = ssl.create_default_context(cafile=str(cert))

    async def scenario():
        async with ScriptedPeer(lambda c: answer_each(c, echo_metadata), ssl=server_side) as peer:
            node = NodeClient(
                1, peer.endpoint, client_id="broker-9",
                security=InterBrokerSecurity("SSL", client_side),
            )  # fmt: skip
            assert named(await node.request(METADATA, 8, metadata("secret"), 10)) == "secret"
            node.close()
            untrusted = NodeClient(1, peer.endpoint, client_id="broker-9",
                                   security=InterBrokerSecurity("SSL", ssl.create_default_context()))  # fmt: skip
            with pytest.raises(NetworkError, match="CERTIFICATE_VERIFY_FAILED"):
                await untrusted.request(METADATA, 8, metadata("secret"), 10)

    run(scenario())


# -- NodeClient: reconnects, backoff, a changing address ------------------------------


def test_backoff_doubles_up_to_the_maximum_and_spreads_by_the_jitter():
    backoff = ReconnectBackoff(initial_ms=50, max_ms=1000, jitter=0.2)
    assert backoff.delay_ms(0) == 0
    assert [backoff.delay_ms(n, lambda: 0.5) for n in range(1, 8)] == [
        50, 100, 200, 400, 800, 1000, 1000
    ]  # fmt: skip
    assert backoff.delay_ms(1, lambda: 0.0) == pytest.approx(40)
    assert backoff.delay_ms(3, lambda: 1.0) == pytest.approx(240)
    assert backoff.delay_ms(10_000, lambda: 0.5) == 1000
    with pytest.raises(ValueError, match="initial_ms=0"):
        ReconnectBackoff(initial_ms=0)
    with pytest.raises(ValueError, match="max_ms=10 is below"):
        ReconnectBackoff(initial_ms=50, max_ms=10)
    with pytest.raises(ValueError, match="jitter=1"):
        ReconnectBackoff(jitter=1)


def test_failed_attempts_back_off_and_a_request_in_backoff_makes_no_attempt():
    async def scenario():
        quick = node_at(plaintext(free_port()), initial_ms=5, max_ms=20, jitter=0)
        delays = []
        for _ in range(5):
            with pytest.raises(NetworkError, match="cannot connect"):
                await quick.request(METADATA, 8, metadata("a"), 10)
            delays.append(quick.reconnect_delay_ms)
        assert quick.connect_attempts == quick.failures == 5
        assert delays == [5, 10, 20, 20, 20]

        async with ScriptedPeer(lambda c: answer_each(c, echo_metadata)) as peer:
            slow = await in_long_backoff()
            with pytest.raises(RequestTimedOutError, match="1 failed connections in a row"):
                await slow.request(METADATA, 8, metadata("a"), 0.2)
            assert slow.connect_attempts == 1  # waited in backoff, did not try
            # A new address is tried at once, whatever the backoff of the old one.
            slow.update_endpoint(peer.endpoint)
            assert named(await slow.request(METADATA, 8, metadata("b"), 10)) == "b"
            assert (slow.connect_attempts, slow.failures) == (2, 0)
            slow.close()

    run(scenario())


def test_a_node_moving_wakes_a_request_waiting_in_backoff_and_close_ends_it():
    async def scenario():
        async with ScriptedPeer(lambda c: answer_each(c, echo_metadata)) as peer:
            node = await in_long_backoff()
            waiting = asyncio.create_task(node.request(METADATA, 8, metadata("moved"), 30))
            await asyncio.sleep(0)
            node.update_endpoint(peer.endpoint)
            assert named(await waiting) == "moved"
            node.close()

        gone = await in_long_backoff()
        waiting = asyncio.create_task(gone.request(METADATA, 8, metadata("a"), 30))
        await asyncio.sleep(0)
        gone.close()
        with pytest.raises(NetworkError, match="channel to node 1 is closed"):
            await waiting

    run(scenario())


def test_a_restarted_broker_is_reached_again_on_its_port_and_then_on_a_new_one(broker_factory):
    first = broker_factory()
    log_dir = first.log_dir

    async def scenario():
        node = node_at(plaintext(first.port), initial_ms=10, max_ms=100)
        await node.request(METADATA, 8, metadata("a"), 10)
        await asyncio.to_thread(first.stop)
        await until(lambda: not node.connected, "the node saw the broker go")
        with pytest.raises(NetworkError):
            await node.request(METADATA, 8, metadata("a"), 10)
        assert node.failures == 2  # the connection that broke, the attempt refused
        again = await asyncio.to_thread(broker_factory, None, log_dir, first.port)
        await node.request(METADATA, 8, metadata("a"), 10)
        assert (node.connect_attempts, node.failures) == (3, 0)

        await asyncio.to_thread(again.stop)
        moved = await asyncio.to_thread(broker_factory, None, log_dir)
        assert moved.port != first.port
        node.update_endpoint(plaintext(moved.port))
        answer = await node.request(METADATA, 8, metadata("a"), 10)
        assert [b["port"] for b in answer["brokers"]] == [moved.port]
        node.close()

    run(scenario())


# -- RequestChannel: the controller's ordered, retried requests -----------------------


def test_channel_sends_one_request_at_a_time_and_resends_one_whose_connection_broke():
    seen: list[str] = []
    pipelined: list[str] = []

    async def drop_r2_once(conn):
        while True:
            header, body = await conn.next_request()
            name = body["topics"][0]["name"]
            seen.append(name)
            await conn.read_available(0.05)
            if conn.buffered_frames:
                pipelined.append(name)
            if name == "r2" and seen.count("r2") == 1:
                await conn.close()
                return
            conn.answer(header, echo_metadata(header, body))

    async def scenario():
        async with ScriptedPeer(drop_r2_once) as peer:
            channel = RequestChannel(node_at(peer.endpoint, 5, 20), request_timeout_s=10)
            answered: list[str] = []
            for i in range(5):
                channel.enqueue(METADATA, 8, metadata(f"r{i}"), lambda a: answered.append(named(a)))
            await until(lambda: len(answered) == 5, "every request answered")
            assert answered == ["r0", "r1", "r2", "r3", "r4"]
            assert seen == ["r0", "r1", "r2", "r2", "r3", "r4"]
            assert pipelined == []
            assert (channel.retries, peer.connections, channel.pending) == (1, 2, 0)
            await channel.close()

    run(scenario())


def test_queued_controller_requests_reach_a_broker_that_comes_back(broker_factory):
    b = broker_factory()

    async def scenario():
        conn = await connected(b.port)
        await create_topic(conn, "state")
        conn.close()
        await asyncio.to_thread(b.stop)
        channel = RequestChannel(node_at(plaintext(b.port), 10, 50), request_timeout_s=10)
        answers: list[tuple[int, int]] = []
        for i in range(5):
            channel.enqueue(
                PRODUCE, 8, produce_body("state", values(f"s{i}".encode())),
                lambda a, i=i: answers.append((i, base_offset(a))),
            )  # fmt: skip
        await until(lambda: channel.retries >= 3, "the channel keeps resending")
        assert answers == [] and channel.pending == 5
        await asyncio.to_thread(broker_factory, None, b.log_dir, b.port)
        await until(lambda: len(answers) == 5, "the queue drained after the restart")
        assert answers == [(i, i) for i in range(5)]
        await channel.close()

    run(scenario())


def test_closing_a_channel_drops_its_queue_and_refuses_more():
    async def scenario():
        async with ScriptedPeer(hold_the_first) as peer:
            node = node_at(peer.endpoint)
            channel = RequestChannel(node, request_timeout_s=30)
            called: list[object] = []
            for i in range(3):
                channel.enqueue(METADATA, 8, metadata(f"q{i}"), called.append, called.append)
            await until(lambda: len(peer.requests) == 1, "the first request is in flight")
            await channel.close()
            assert called == [] and channel.pending == 0 and node.closed
            assert [b["topics"][0]["name"] for _, b in peer.requests] == ["q0"]
            with pytest.raises(ChannelClosed, match="channel to node 1 is closed"):
                channel.enqueue(METADATA, 8, metadata("late"), called.append)

    run(scenario())


def test_a_request_the_broker_cannot_take_goes_to_on_error_and_the_queue_moves_on():
    offered = {API_VERSIONS: (0, 3), METADATA: (0, 8)}

    async def scenario():
        async with ScriptedPeer(
            lambda c: answer_each(c, echo_metadata), api_versions=offered
        ) as peer:
            channel = RequestChannel(node_at(peer.endpoint))
            events: list[object] = []
            channel.enqueue(LEADER_AND_ISR, 3, {}, events.append, events.append)
            channel.enqueue(METADATA, 8, metadata("after"), lambda a: events.append(named(a)))
            await until(lambda: len(events) == 2, "both requests done")
            assert isinstance(events[0], UnsupportedVersionError) and events[1] == "after"
            assert channel.retries == 0
            await channel.close()

    run(scenario())
