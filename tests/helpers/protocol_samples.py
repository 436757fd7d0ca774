"""Hypothesis strategies that draw message bodies from our declarations.

Shared by the protocol tests: a body drawn for (struct, version) holds exactly
the fields that version has, with values of the declared wire types.
"""

from __future__ import annotations

from hypothesis import strategies as st

from broker.protocol import types as t
from broker.protocol.apis import API_BY_KEY

_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

# UTF-8 encodable text (no lone surrogates), short enough to keep examples fast.
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def value_strategy(typ: t.Type, version: int, flexible: bool, nullable: bool) -> st.SearchStrategy:
    if isinstance(typ, t.Struct):
        return body_strategy(typ, version, flexible)
    if isinstance(typ, t.Array):
        s = st.lists(value_strategy(typ.element, version, flexible, False), max_size=3)
    elif typ.name in _INT_BOUNDS:
        s = st.integers(*_INT_BOUNDS[typ.name])
    elif typ is t.BOOL:
        s = st.booleans()
    elif typ is t.FLOAT64:
        s = st.floats(allow_nan=False)
    elif typ is t.UUID:
        s = st.uuids()
    elif typ is t.STRING:
        s = _TEXT
    elif typ is t.BYTES or typ is t.RECORDS:
        s = st.binary(max_size=40)
    else:
        raise AssertionError(f"no strategy for {typ!r}")
    return st.one_of(st.none(), s) if nullable else s


def body_strategy(struct: t.Struct, version: int, flexible: bool) -> st.SearchStrategy:
    fields = {}
    for f in struct.fields:
        if not t.in_range(version, f.versions) or (f.tag is not None and not flexible):
            continue
        nullable = t.in_range(version, f.nullable) or f.type is t.RECORDS
        fields[f.name] = value_strategy(f.type, version, flexible, nullable)
    return st.fixed_dictionaries(fields)


def api_body_strategy(api_key: int, version: int, response: bool) -> st.SearchStrategy:
    api = API_BY_KEY[api_key]
    struct = api.response if response else api.request
    return body_strategy(struct, version, api.is_flexible(version))


def all_api_versions() -> list[tuple[int, int]]:
    return [
        (api.key, v)
        for api in API_BY_KEY.values()
        for v in range(api.min_version, api.max_version + 1)
    ]


def assert_matches(expected, actual, path: str = "body") -> None:
    """Every value in `expected` is in `actual` (which may hold more keys: defaults)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for k, v in expected.items():
            assert k in actual, f"{path}.{k} missing"
            assert_matches(v, actual[k], f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            assert_matches(e, a, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
