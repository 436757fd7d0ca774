"""The connection's protocol (broker/server/network.py) over a real socket, in process:
frames split out of whatever pieces the bytes arrive in, reading paused while the pipeline
is full and resumed as answers leave, a large fetch answer sent by sendfile on the same
transport with the answers behind it in order."""

from __future__ import annotations

import asyncio
import struct

from broker.protocol.apis import FETCH, PRODUCE
from broker.protocol.framing import decode_response
from broker.records.batch import iter_records
from broker.server.network import SENDFILE_THRESHOLD, NetworkServer
from tests.helpers.server_requests import create, fetch_body, produce_body, values


def _sized(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


async def _answers(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        out.append(await reader.readexactly(size))
    return out


def _correlation(answer: bytes) -> int:
    return struct.unpack_from(">i", answer)[0]


def _run(broker, scenario):
    return broker.loop.run_until_complete(asyncio.wait_for(scenario(), 30))


def test_frames_in_odd_pieces_are_each_answered_once_in_order(led):
    """Three acks=1 produces cut into pieces of 7 bytes (a size prefix split, frames
    straddling reads): each handled once complete, answered in request order."""
    frames = [
        led.frame(PRODUCE, 8, produce_body("t", values(b"v%d" % i), acks=1)) for i in range(3)
    ]
    stream = b"".join(_sized(f) for f in frames)

    async def scenario():
        server = NetworkServer(led.state, "127.0.0.1", 0, 1 << 20)
        port = await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for at in range(0, len(stream), 7):
            writer.write(stream[at : at + 7])
            await writer.drain()
            await asyncio.sleep(0)
        answers = await _answers(reader, 3)
        writer.close()
        await server.stop()
        return [_correlation(a) for a in answers]

    assert _run(led, scenario) == [led._correlation - 2, led._correlation - 1, led._correlation]
    assert led.state.replicas.get("t", 0).log.log_end_offset == 3


def test_a_full_pipeline_pauses_reading_until_answers_leave(led):
    """Depth 2: of six acks=all produces sent at once, two are appended and the connection
    stops reading; each follower fetch acknowledges what was appended, its answers leave,
    and the waiting frames are taken, in order, until all six are answered."""
    frames = [led.frame(PRODUCE, 8, produce_body("t", values(b"v%d" % i))) for i in range(6)]
    first = led._correlation - 5
    log = led.state.replicas.get("t", 0).log

    async def scenario():
        server = NetworkServer(led.state, "127.0.0.1", 0, 1 << 20)
        server.depth = 2
        port = await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_sized(f) for f in frames))
        while log.log_end_offset < 2:
            await asyncio.sleep(0.01)
        (connection,) = server._connections
        paused = (log.log_end_offset, connection.transport.is_reading(), len(connection.backlog))
        answers: list[bytes] = []
        while len(answers) < 6:
            appended = log.log_end_offset
            led.outcome(led.frame(FETCH, 11, {**fetch_body("t", appended), "replica_id": 1}))
            answers += await _answers(reader, appended - len(answers))
            while log.log_end_offset == appended and len(answers) < 6:
                await asyncio.sleep(0.01)
        reading = connection.transport.is_reading()
        writer.close()
        await server.stop()
        return paused, [_correlation(a) for a in answers], reading

    paused, correlations, reading = _run(led, scenario)
    assert paused == (2, False, 4)
    assert correlations == list(range(first, first + 6))
    assert reading and log.log_end_offset == 6


def test_a_large_fetch_answer_goes_by_sendfile_and_the_answers_behind_it_follow(broker):
    """A region above the sendfile threshold leaves by loop.sendfile on the connection's
    transport; a produce pipelined behind the fetch is answered after it."""
    create(broker, "t")
    big = b"x" * (SENDFILE_THRESHOLD + 1000)
    broker.call(PRODUCE, 8, produce_body("t", values(big), acks=1))
    fetch = broker.frame(FETCH, 11, fetch_body("t", 0))
    produce = broker.frame(PRODUCE, 8, produce_body("t", values(b"after"), acks=1))

    async def scenario():
        server = NetworkServer(broker.state, "127.0.0.1", 0, 1 << 20)
        port = await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_sized(fetch) + _sized(produce))
        answers = await _answers(reader, 2)
        writer.close()
        await server.stop()
        return answers

    sent = []
    real = broker.loop.sendfile
    broker.loop.sendfile = lambda transport, file, offset, count: (
        sent.append(count),
        real(transport, file, offset, count),
    )[1]
    fetched, produced = _run(broker, scenario)
    assert _correlation(produced) == _correlation(fetched) + 1
    records = decode_response(FETCH, 11, fetched)[1]["responses"][0]["partitions"][0]["records"]
    assert [r.value for r in iter_records(records)] == [big]
    assert len(sent) == 1 and sent[0] > SENDFILE_THRESHOLD
