"""Schema compatibility: can data written with one schema be read with another?

The rules are those of the Avro specification's "Schema Resolution" section,
applied to every value the writer schema can produce:

* primitives match themselves, plus the promotions int -> long, float, double;
  long -> float, double; float -> double; string <-> bytes;
* records match by full name (or a reader alias); each reader field is taken
  from the writer field of the same name (or a reader field alias), and a reader
  field the writer lacks needs a default; writer fields the reader lacks are
  skipped;
* enums match by name; a writer symbol the reader lacks is an error unless the
  reader enum has a default symbol;
* fixed match by name and size; arrays and maps by their items and values;
* a writer union is readable when each of its branches is; a reader union reads a
  non-union writer when one of its branches does.

Registry levels build on that: BACKWARD means the new schema reads data of the
existing ones, FORWARD that existing schemas read the new one's data, FULL both;
the _TRANSITIVE variants check every existing version instead of only the latest.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from schemas.canonical import ParsedSchema, kind

# The Avro specification's type promotions: (writer type, reader type) pairs a reader resolves.
PROMOTIONS = frozenset(
    {
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    }
)


class Level(enum.Enum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def parse(cls, text: Any) -> Level:
        """The level named by ``text``, case-insensitively; raises ValueError."""
        if isinstance(text, str):
            try:
                return cls[text.strip().upper()]
            except KeyError:
                pass
        raise ValueError(f"invalid compatibility level {text!r}")

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


def read_problems(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer``; empty when it can."""
    return _Resolver(reader, writer).check(reader.tree, writer.tree, "")


def can_read(reader: ParsedSchema, writer: ParsedSchema) -> bool:
    return not read_problems(reader, writer)


def problems(level: Level, new: ParsedSchema, existing: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` may not follow ``existing`` (oldest first) under ``level``; empty when it may."""
    if level is Level.NONE or not existing:
        return []
    targets = list(existing) if level.transitive else [existing[-1]]
    found = []
    for position, old in enumerate(targets):
        label = (
            f"version {position + 1} of {len(targets)}"
            if level.transitive
            else "the latest version"
        )
        if level.backward:
            found += [f"new schema cannot read {label}: {p}" for p in read_problems(new, old)]
        if level.forward:
            found += [f"{label} cannot read the new schema: {p}" for p in read_problems(old, new)]
    return found


class _Resolver:
    """One reader/writer pair; remembers record pairs in progress so recursive types end."""

    def __init__(self, reader: ParsedSchema, writer: ParsedSchema) -> None:
        self.reader = reader
        self.writer = writer
        self.in_progress: set[tuple[str, str]] = set()

    def check(self, r: Any, w: Any, path: str) -> list[str]:
        r_kind = kind(self.reader, r)
        w_kind = kind(self.writer, w)
        r_node = self.reader.resolve(r)
        w_node = self.writer.resolve(w)
        where = path or "/"

        if w_kind == "union":
            found = []
            for i, branch in enumerate(w_node):
                found += self.check(r, branch, f"{path}/{i}")
            return found
        if r_kind == "union":
            if any(not self.check(branch, w, path) for branch in r_node):
                return []
            return [
                f"TYPE_MISMATCH at {where}: reader union has no branch for writer type {w_kind}"
            ]
        if r_kind != w_kind:
            if (w_kind, r_kind) in PROMOTIONS:
                return []
            return [f"TYPE_MISMATCH at {where}: reader {r_kind} cannot read writer {w_kind}"]
        if r_kind == "record":
            return self._record(r_node, w_node, path)
        if r_kind == "enum":
            return self._names(r_node, w_node, path) or self._enum(r_node, w_node, path)
        if r_kind == "fixed":
            found = self._names(r_node, w_node, path)
            if not found and r_node["size"] != w_node["size"]:
                found.append(
                    f"FIXED_SIZE_MISMATCH at {where}: reader size {r_node['size']}, "
                    f"writer size {w_node['size']}"
                )
            return found
        if r_kind == "array":
            return self.check(r_node["items"], w_node["items"], f"{path}/items")
        if r_kind == "map":
            return self.check(r_node["values"], w_node["values"], f"{path}/values")
        return []  # identical primitives

    def _names(self, r_node: dict, w_node: dict, path: str) -> list[str]:
        if w_node["name"] == r_node["name"] or w_node["name"] in r_node.get("aliases", ()):
            return []
        return [
            f"NAME_MISMATCH at {path or '/'}: reader {r_node['name']} does not match "
            f"writer {w_node['name']}"
        ]

    def _enum(self, r_node: dict, w_node: dict, path: str) -> list[str]:
        missing = [s for s in w_node["symbols"] if s not in r_node["symbols"]]
        if not missing or "default" in r_node:
            return []
        return [
            f"MISSING_ENUM_SYMBOLS at {path or '/'}: reader {r_node['name']} lacks "
            f"{', '.join(missing)} and has no default symbol"
        ]

    def _record(self, r_node: dict, w_node: dict, path: str) -> list[str]:
        found = self._names(r_node, w_node, path)
        if found:
            return found
        pair = (r_node["name"], w_node["name"])
        if pair in self.in_progress:
            return []  # a recursive reference: the enclosing check covers it
        self.in_progress.add(pair)
        try:
            writer_fields = {f["name"]: f for f in w_node["fields"]}
            for field in r_node["fields"]:
                here = f"{path}/fields/{field['name']}"
                source = next(
                    (
                        writer_fields[n]
                        for n in [field["name"], *field.get("aliases", ())]
                        if n in writer_fields
                    ),
                    None,
                )
                if source is not None:
                    found += self.check(field["type"], source["type"], here)
                elif "default" not in field:
                    found.append(
                        f"READER_FIELD_MISSING_DEFAULT_VALUE at {here}: field {field['name']!r} "
                        f"of {r_node['name']} is missing from the writer and has no default"
                    )
        finally:
            self.in_progress.discard(pair)
        return found
