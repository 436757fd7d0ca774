"""Hostile input: random, truncated and mutated frames raise DecodeError and nothing
else, and they do it quickly (no huge allocations, no long loops)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.codec import decode_response_body
from broker.protocol.framing import (
    FrameDecoder,
    FrameTooLarge,
    decode_request,
    decode_request_header,
    encode_request,
)
from broker.protocol.types import DecodeError
from tests.helpers.protocol_samples import all_api_versions, api_body_strategy

FUZZ = settings(max_examples=400, deadline=200, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def valid_request_frames(draw) -> bytes:
    api_key, version = draw(st.sampled_from(all_api_versions()))
    body = draw(api_body_strategy(api_key, version, response=False))
    corr = draw(st.integers(-(2**31), 2**31 - 1))
    client_id = draw(st.one_of(st.none(), st.text(max_size=8)))
    return encode_request(api_key, version, corr, client_id, body)[4:]


@st.composite
def mutated(draw, frames: st.SearchStrategy[bytes]) -> bytes:
    frame = bytearray(draw(frames))
    how = draw(st.sampled_from(["truncate", "flip", "insert", "splice"]))
    if how == "truncate" or not frame:
        return bytes(frame[: draw(st.integers(0, max(0, len(frame) - 1)))])
    i = draw(st.integers(0, len(frame) - 1))
    if how == "flip":
        frame[i] = draw(st.integers(0, 255))
    elif how == "insert":
        frame[i:i] = draw(st.binary(min_size=1, max_size=8))
    else:  # a length-shaped value where any field may start
        frame[i : i + 4] = draw(
            st.sampled_from([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\xff\xff\xff\xff"])
        )
    return bytes(frame)


def _decode_or_decode_error(frame: bytes) -> None:
    try:
        decode_request(frame)
    except DecodeError:
        pass


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_into_request_decoding(data):
    _decode_or_decode_error(data)
    try:
        decode_request_header(data)
    except DecodeError:
        pass


@FUZZ
@given(st.binary(max_size=60), st.sampled_from(all_api_versions()))
def test_random_body_after_a_valid_header(body, api_version):
    api_key, version = api_version
    frame = encode_request(api_key, version, 1, "fuzz", {})[4:]
    _, offset = decode_request_header(frame)
    _decode_or_decode_error(frame[:offset] + body)


@FUZZ
@given(valid_request_frames())
def test_valid_frames_decode(frame):
    header, body = decode_request(frame)
    assert isinstance(body, dict)
    assert (
        encode_request(
            header.api_key, header.api_version, header.correlation_id, header.client_id, body
        )[4:]
        == frame
    )


@FUZZ
@given(mutated(valid_request_frames()))
def test_truncated_and_mutated_frames(frame):
    _decode_or_decode_error(frame)


@FUZZ
@given(st.sampled_from(all_api_versions()), st.binary(max_size=120))
def test_random_response_bodies(api_version, data):
    api_key, version = api_version
    try:
        decode_response_body(api_key, version, data)
    except DecodeError:
        pass


@FUZZ
@given(st.lists(st.binary(max_size=40), max_size=10))
def test_frame_decoder_on_random_chunks(chunks):
    d = FrameDecoder(max_frame_bytes=64)
    try:
        for chunk in chunks:
            for frame in d.feed(chunk):
                assert len(frame) <= 64
            assert d.buffered <= 64 + 4
    except FrameTooLarge:
        pass


@FUZZ
@given(st.lists(st.binary(max_size=50), max_size=8), st.data())
def test_frame_decoder_recovers_every_frame(frames, data):
    stream = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    d = FrameDecoder(max_frame_bytes=50)
    out = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        out += d.feed(stream[prev:cut])
        prev = cut
    assert out == frames
