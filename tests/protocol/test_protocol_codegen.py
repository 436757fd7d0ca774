"""The generated codec (broker/protocol/codegen.py) against the closure codec it falls
back to: on every declared API, version and direction, the generated functions alone
(no fallback) write the same bytes and read the same values; on malformed input the
public codec raises what the closure codec raises."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.apis import API_BY_KEY
from broker.protocol.codec import compile_struct, reference_struct
from broker.protocol.types import DecodeError, EncodeError, Reader, Writer
from tests.helpers.protocol_samples import all_api_versions, api_body_strategy

SETTINGS = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))


def _structs(api_key: int, version: int, response: bool):
    api = API_BY_KEY[api_key]
    s = api.response if response else api.request
    flexible = api.is_flexible(version)
    return compile_struct(s, version, flexible), reference_struct(s, version, flexible)


def _bytes(w: Writer) -> bytes:
    return b"".join(bytes(p) for p in w.getparts())


@st.composite
def cases(draw):
    api_key, version = draw(st.sampled_from(all_api_versions()))
    response = draw(st.booleans())
    body = draw(api_body_strategy(api_key, version, response))
    return api_key, version, response, body


@SETTINGS
@given(cases())
def test_generated_code_alone_matches_the_reference(case):
    api_key, version, response, body = case
    generated, reference = _structs(api_key, version, response)
    expected = Writer()
    reference.encode(expected, body)
    data = _bytes(expected)
    got = Writer()
    generated.fast_encode(got, body)  # raises if the generated code gave up
    assert _bytes(got) == data
    r = Reader(data)
    decoded = generated.fast_decode(r)
    assert r.pos == len(data)
    assert decoded == reference.decode(Reader(data))


@SETTINGS
@given(cases(), st.data())
def test_malformed_input_raises_what_the_reference_raises(case, data):
    api_key, version, response, body = case
    generated, reference = _structs(api_key, version, response)
    w = Writer()
    reference.encode(w, body)
    encoded = _bytes(w)
    cut = data.draw(st.integers(0, max(0, len(encoded) - 1)))
    damaged = bytearray(encoded[:cut])
    if damaged and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(damaged) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
        damaged += encoded[cut:]
    outcomes = []
    for codec in (generated, reference):
        try:
            outcomes.append(("ok", codec.decode(Reader(bytes(damaged)))))
        except DecodeError as exc:
            outcomes.append(("error", str(exc), getattr(exc, "__notes__", [])))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(
    "bad",
    [
        {"topic_data": [{"name": None, "partition_data": []}]},
        {"acks": 1 << 20},
        {"topic_data": [{"name": "t", "partition_data": [{"index": "x", "records": b""}]}]},
    ],
)
def test_encode_errors_are_the_reference_ones(bad):
    generated, reference = _structs(0, 9, response=False)
    errors = []
    for codec in (generated, reference):
        w = Writer()
        w.buf += b"before"
        with pytest.raises(EncodeError) as caught:
            codec.encode(w, {"transactional_id": None, "timeout_ms": 1, **bad})
        errors.append((str(caught.value), caught.value.__notes__))
    assert errors[0] == errors[1]
