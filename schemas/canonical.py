"""Parse and validate Avro schema text into one normalized tree.

The registry needs three things from a schema: a strict validity check (fastavro
alone accepts records without fields, duplicate field names, union defaults that
do not match the first branch), an identity (two spellings of the same schema must
get the same id), and a shape the compatibility checker can walk. The normalized
tree gives all three:

* named types carry their full name in ``name`` (``namespace`` is folded in and
  dropped), are defined once at their first occurrence and referenced afterwards
  by full name, exactly as the Avro specification resolves them;
* a primitive written as ``{"type": "int"}`` becomes ``"int"`` (it has no other
  attributes); a primitive with attributes (``logicalType``) stays an object;
* everything else (doc, default, order, aliases, logical types, custom
  properties) is kept, because Confluent treats schemas differing in those as
  different schemas.

The identity is the tree dumped as JSON with sorted keys and no whitespace.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import fastavro

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELD_ORDERS = frozenset({"ascending", "descending", "ignore"})
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)


class InvalidSchema(ValueError):
    """The text is not a valid Avro schema; the message says why."""


@dataclass(frozen=True)
class ParsedSchema:
    """A validated Avro schema.

    ``text`` is the submitted schema as compact JSON (what the registry stores and
    serves), ``tree`` the normalized form, ``named`` every named type by full name,
    and ``canonical`` the identity string.
    """

    text: str
    tree: Any
    named: dict[str, dict] = field(repr=False)
    canonical: str = field(repr=False)

    def resolve(self, node: Any) -> Any:
        """A named-type reference replaced by its definition; anything else unchanged."""
        if isinstance(node, str) and node not in PRIMITIVES:
            return self.named[node]
        return node


def parse(text: str) -> ParsedSchema:
    """Validate ``text`` as an Avro schema; raises InvalidSchema."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchema("Empty schema")
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InvalidSchema(f"Invalid schema JSON: {exc}") from None
    normalizer = _Normalizer()
    tree = normalizer.walk(raw, namespace="", where="")
    # Our own checks above are the strict ones; fastavro must also accept the
    # schema, since serializers hand it the stored text.
    try:
        fastavro.parse_schema(raw, named_schemas={})
    except Exception as exc:  # fastavro raises many types (KeyError, TypeError, ...)
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    canonical = json.dumps(tree, sort_keys=True, separators=(",", ":"))
    compact = json.dumps(raw, separators=(",", ":"), ensure_ascii=False)
    return ParsedSchema(text=compact, tree=tree, named=normalizer.named, canonical=canonical)


def kind(schema: ParsedSchema, node: Any) -> str:
    """The Avro type of a tree node: a primitive name, record, enum, fixed, array, map or union."""
    node = schema.resolve(node)
    if isinstance(node, list):
        return "union"
    if isinstance(node, str):
        return node
    found = node["type"]
    return "record" if found == "error" else found


def _fullname(name: Any, namespace: str, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidSchema(f"{where or '/'}: a name must be a non-empty string, got {name!r}")
    full = name if "." in name else (f"{namespace}.{name}" if namespace else name)
    for part in full.split("."):
        if not _NAME.match(part):
            raise InvalidSchema(f"{where or '/'}: invalid name {full!r}")
    return full


def _space_of(fullname: str) -> str:
    return fullname.rpartition(".")[0]


class _Normalizer:
    def __init__(self) -> None:
        self.named: dict[str, dict] = {}

    def walk(self, node: Any, namespace: str, where: str) -> Any:
        if isinstance(node, str):
            return self._reference(node, namespace, where)
        if isinstance(node, list):
            return self._union(node, namespace, where)
        if not isinstance(node, dict):
            raise InvalidSchema(
                f"{where or '/'}: a schema is a string, array or object, got {node!r}"
            )
        if "type" not in node:
            raise InvalidSchema(f"{where or '/'}: missing 'type'")
        declared = node["type"]
        if declared in PRIMITIVES:
            rest = {k: v for k, v in node.items() if k != "type"}
            return {"type": declared, **rest} if rest else declared
        if declared in NAMED_KINDS:
            return self._named(node, namespace, where)
        if declared == "array":
            if "items" not in node:
                raise InvalidSchema(f"{where or '/'}: array without 'items'")
            items = self.walk(node["items"], namespace, f"{where}/items")
            return {**node, "items": items}
        if declared == "map":
            if "values" not in node:
                raise InvalidSchema(f"{where or '/'}: map without 'values'")
            values = self.walk(node["values"], namespace, f"{where}/values")
            return {**node, "values": values}
        if isinstance(declared, dict | list):
            # {"type": {...}} nests a schema; it means the inner schema.
            return self.walk(declared, namespace, where)
        if isinstance(declared, str):
            return self._reference(declared, namespace, where)
        raise InvalidSchema(f"{where or '/'}: invalid type {declared!r}")

    def _reference(self, name: str, namespace: str, where: str) -> str:
        if name in PRIMITIVES:
            return name
        candidates = [name] if "." in name else [f"{namespace}.{name}", name]
        for candidate in candidates:
            if candidate in self.named:
                return candidate
        raise InvalidSchema(f"{where or '/'}: unknown type {name!r}")

    def _union(self, branches: list, namespace: str, where: str) -> list:
        if not branches:
            raise InvalidSchema(f"{where or '/'}: a union needs at least one branch")
        seen: set[str] = set()
        out = []
        for i, branch in enumerate(branches):
            if isinstance(branch, list):
                raise InvalidSchema(f"{where}/{i}: unions may not immediately contain unions")
            normalized = self.walk(branch, namespace, f"{where}/{i}")
            if isinstance(normalized, str):
                key = normalized
            elif normalized["type"] in NAMED_KINDS:
                key = normalized["name"]
            else:
                key = normalized["type"]
            if key in seen:
                raise InvalidSchema(f"{where}/{i}: duplicate {key!r} in union")
            seen.add(key)
            out.append(normalized)
        return out

    def _named(self, node: dict, namespace: str, where: str) -> dict:
        enclosing = node.get("namespace", namespace)
        if enclosing is None:
            enclosing = ""
        if not isinstance(enclosing, str):
            raise InvalidSchema(f"{where or '/'}: namespace must be a string")
        full = _fullname(node.get("name"), enclosing, where)
        if full in self.named or full.rpartition(".")[2] in PRIMITIVES:
            raise InvalidSchema(f"{where or '/'}: type {full!r} is already defined")
        own_space = _space_of(full)
        out = {k: v for k, v in node.items() if k not in ("namespace", "name")}
        out["name"] = full
        if "aliases" in node:
            out["aliases"] = [_fullname(a, own_space, where) for a in _names_list(node, where)]
        declared = node["type"]
        if declared == "enum":
            self._check_enum(node, where)
            self.named[full] = out
        elif declared == "fixed":
            size = node.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise InvalidSchema(
                    f"{where or '/'}: fixed {full!r} needs a non-negative integer size"
                )
            self.named[full] = out
        else:
            # Register before walking fields so a record can refer to itself.
            self.named[full] = out
            out["fields"] = self._fields(node, own_space, full, where)
        return out

    def _check_enum(self, node: dict, where: str) -> None:
        symbols = node.get("symbols")
        if not isinstance(symbols, list):
            raise InvalidSchema(f"{where or '/'}: enum needs a 'symbols' array")
        for symbol in symbols:
            if not isinstance(symbol, str) or not _NAME.match(symbol):
                raise InvalidSchema(f"{where or '/'}: invalid enum symbol {symbol!r}")
        if len(set(symbols)) != len(symbols):
            raise InvalidSchema(f"{where or '/'}: duplicate enum symbols")
        if "default" in node and node["default"] not in symbols:
            raise InvalidSchema(f"{where or '/'}: enum default {node['default']!r} is not a symbol")

    def _fields(self, node: dict, own_space: str, full: str, where: str) -> list[dict]:
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise InvalidSchema(f"{where or '/'}: record {full!r} needs a 'fields' array")
        out = []
        seen: set[str] = set()
        for i, spec in enumerate(fields):
            here = f"{where}/fields/{i}"
            if not isinstance(spec, dict):
                raise InvalidSchema(f"{here}: a field is an object")
            name = spec.get("name")
            if not isinstance(name, str) or not _NAME.match(name):
                raise InvalidSchema(f"{here}: invalid field name {name!r}")
            if name in seen:
                raise InvalidSchema(f"{here}: duplicate field {name!r} in {full!r}")
            seen.add(name)
            if "type" not in spec:
                raise InvalidSchema(f"{here}: field {name!r} has no type")
            if "order" in spec and spec["order"] not in _FIELD_ORDERS:
                raise InvalidSchema(f"{here}: invalid order {spec['order']!r}")
            if "aliases" in spec:
                for alias in _names_list(spec, here):
                    if not _NAME.match(alias):
                        raise InvalidSchema(f"{here}: invalid field alias {alias!r}")
            normalized = dict(spec)
            normalized["type"] = self.walk(spec["type"], own_space, f"{here}/type")
            if "default" in spec and not self._default_fits(normalized["type"], spec["default"]):
                raise InvalidSchema(
                    f"{here}: invalid default for field {name!r}: {spec['default']!r}"
                )
            out.append(normalized)
        return out

    def _default_fits(self, node: Any, value: Any) -> bool:
        """Whether ``value`` is a valid JSON default for the normalized ``node`` (Avro spec)."""
        if isinstance(node, str) and node not in PRIMITIVES:
            node = self.named[node]
        if isinstance(node, list):
            # A union's default belongs to its first branch.
            return self._default_fits(node[0], value)
        declared = node if isinstance(node, str) else node["type"]
        if declared == "null":
            return value is None
        if declared == "boolean":
            return isinstance(value, bool)
        if declared in ("int", "long"):
            low, high = _INT_RANGE if declared == "int" else _LONG_RANGE
            return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        if declared in ("float", "double"):
            if isinstance(value, str):
                return value in ("NaN", "Infinity", "-Infinity")
            return (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and not math.isnan(value)
            )
        if declared in ("bytes", "string"):
            return isinstance(value, str)
        if declared == "fixed":
            return isinstance(value, str) and len(value) == node["size"]
        if declared == "enum":
            return value in node["symbols"]
        if declared == "array":
            return isinstance(value, list) and all(
                self._default_fits(node["items"], v) for v in value
            )
        if declared == "map":
            return isinstance(value, dict) and all(
                self._default_fits(node["values"], v) for v in value.values()
            )
        if declared in ("record", "error"):
            if not isinstance(value, dict):
                return False
            for spec in node["fields"]:
                if spec["name"] in value:
                    if not self._default_fits(spec["type"], value[spec["name"]]):
                        return False
                elif "default" not in spec:
                    return False
            return True
        return False


def _names_list(node: dict, where: str) -> list[str]:
    aliases = node["aliases"]
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise InvalidSchema(f"{where or '/'}: aliases must be an array of strings")
    return aliases
