"""Decoding Confluent-framed Avro values of one topic into Arrow batches of its
target schema.

Per chunk of fetched records (one partition): the 5-byte frames are checked and
the schema ids read for all rows at once; rows are grouped by writer schema id;
each group is decoded by the columnar decoder compiled for (writer, target), or
by fastavro row by row when the columnar one does not read that schema; rows
that fail are re-read by fastavro one by one, which either rescues them (the
two disagree only on corrupt data, and fastavro is the reference) or names the
reason they are quarantined. Rows come out in their input order, with the
``_kafka_*`` columns and ``_schema_id`` appended.

Every input record is either in the batch or quarantined, never dropped:
``len(chunk) == batch.num_rows + len(quarantined)``. Reasons:

* ``null value`` — a tombstone (value None): an Avro topic has no meaning for
  it, and keeping it makes the ledger balance; it is quarantined, not loaded;
* ``not Confluent framing: ...`` — shorter than 5 bytes or magic byte not 0
  (the framing is schemas/serde.py's, read here for a whole chunk at once);
* ``unknown schema id N`` — the registry answers 404 for the id;
* ``writer schema N not resolvable to the target: ...`` — Avro resolution of the
  writer schema as the target schema fails (checked once per id);
* ``undecodable body: ...`` — fastavro's error for that value (truncated,
  trailing bytes, bad UTF-8, a null where the target has none, ...).

Other registry failures (connection refused, 5xx) raise: a registry outage must
fail (and retry) the task, not quarantine a partition's data.

Chunks of 50,000 records (``chunk_size``) decode at about the speed of larger
ones; smaller ones pay the fixed cost per Arrow call (a few hundred calls per
chunk) more often. Memory: a chunk's records, its packed values and about as
much again in Arrow buffers while it is decoded (~40 MB for 50,000
PageViewEvents); nothing is kept between chunks.

The target schema is the latest version of ``<topic>-value`` when the decoder is
made (or one given); schemas are fetched once per id and cached, as are the
compiled plans.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from broker.records.batch import Record
from broker.records.columnar import RecordColumns
from broker.records.vectorized import arange, packed
from ingest import columns as meta
from ingest.decoders import columnar
from ingest.decoders.arrow_types import UnsupportedSchema, arrow_schema_for, as_parsed
from ingest.decoders.base import DecodedChunk, Quarantined, as_columns, decode_stream
from ingest.decoders.rowwise import BadRow, RowDecoder
from schemas.canonical import InvalidSchema, ParsedSchema, parse
from schemas.client import RegistryClient, RegistryError
from schemas.compatibility import read_problems
from schemas.serde import FRAME_SIZE, frame_columns, frame_problem, frame_schema_id, topic_subject


@dataclass
class _Writer:
    """What the decoder knows about one writer schema id."""

    schema_id: int
    refused: str | None = None  # the quarantine reason for all its rows
    rows: RowDecoder | None = None
    plan: columnar.Node | None = None  # None: read row by row


class ConfluentAvroDecoder:
    metadata = meta.WITH_SCHEMA_ID

    def __init__(
        self,
        registry: RegistryClient,
        topic: str,
        target_schema: str | dict | ParsedSchema | None = None,
        *,
        chunk_size: int = 50_000,
        columnar_decoding: bool = True,
    ) -> None:
        self.registry = registry
        self.topic = topic
        if target_schema is None:
            target_schema = registry.latest(topic_subject(topic)).schema
        self.target = self.value_schema = as_parsed(target_schema)
        self.schema = arrow_schema_for(self.target, self.metadata)
        self.value_type = pa.struct(arrow_schema_for(self.target, ()))
        self.chunk_size = chunk_size
        self.columnar_decoding = columnar_decoding
        self._writers: dict[int, _Writer] = {}

    # -- writer schemas -----------------------------------------------------

    def _writer(self, schema_id: int) -> _Writer:
        found = self._writers.get(schema_id)
        if found is None:
            found = self._writers[schema_id] = self._load_writer(schema_id)
        return found

    def _load_writer(self, schema_id: int) -> _Writer:
        try:
            text = self.registry.schema(schema_id)
        except RegistryError as exc:
            if exc.status == 404:
                return _Writer(schema_id, refused=f"unknown schema id {schema_id}")
            raise
        try:
            writer = parse(text)
        except InvalidSchema as exc:
            return _Writer(schema_id, refused=f"writer schema {schema_id} is invalid: {exc}")
        problems = read_problems(self.target, writer)
        if problems:
            reason = "; ".join(problems)
            return _Writer(
                schema_id,
                refused=f"writer schema {schema_id} not resolvable to the target: {reason}",
            )
        found = _Writer(schema_id, rows=RowDecoder(writer, self.target))
        if self.columnar_decoding:
            try:
                found.plan = columnar.compile_plan(writer, self.target)
            except (UnsupportedSchema, columnar.Unresolvable):
                found.plan = None  # fastavro reads it row by row
        return found

    # -- decoding -----------------------------------------------------------

    def decode(self, partition: int, records: RecordColumns | Sequence[Record]) -> DecodedChunk:
        """Decode one chunk (bounded by the caller: see ``decode_stream``)."""
        records = as_columns(records)
        count = len(records)
        values = records.value
        data, starts, ends = packed(values, self._pad())
        ids, reasons = self._frames(values, starts, ends, data)
        schema_ids = pc.unique(ids.filter(pc.is_valid(ids))).to_pylist()
        writers = {schema_id: self._writer(schema_id) for schema_id in schema_ids}
        if self._pad() > len(data) - (ends[-1].as_py() if count else 0):
            # A writer schema new in this chunk reads further past a corrupt
            # row's end than the padding allows: pack again with more.
            data, starts, ends = packed(values, self._pad())

        parts: list[pa.StructArray] = []
        part_rows: list[pa.Array] = []
        for schema_id, writer in writers.items():
            if len(writers) == 1 and not reasons:
                indices = None  # every row: no masks, no takes
            else:
                mask = pc.equal(ids, schema_id).fill_null(False)
                indices = pc.indices_nonzero(mask).cast(pa.int64())
            if writer.refused:
                rows = range(count) if indices is None else indices.to_pylist()
                for i in rows:
                    reasons[i] = writer.refused
                continue
            struct, kept = self._decode_group(writer, values, indices, data, starts, ends, reasons)
            parts.append(struct)
            part_rows.append(kept)

        if parts:
            struct = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
            if len(part_rows) == 1:
                rows = part_rows[0]
            else:
                rows = pa.concat_arrays(part_rows)
                order = pc.sort_indices(rows)  # back to offset order
                struct, rows = struct.take(order), rows.take(order)
        else:
            struct = pa.array([], self.value_type)
            rows = pa.array([], pa.int64())
        batch = meta.with_metadata(self.schema, struct, partition, records, rows, ids)
        quarantined = [
            Quarantined(
                records.offset[i].as_py(),
                records.key[i].as_py(),
                values[i].as_py(),
                reason,
                frame_schema_id(values[i].as_py()),
            )
            for i, reason in sorted(reasons.items())
        ]
        assert batch.num_rows + len(quarantined) == count, "a record was dropped"
        return DecodedChunk(partition, batch, quarantined)

    def decode_stream(
        self, partition: int, records: Iterable[Record], chunk_size: int | None = None
    ) -> Iterator[DecodedChunk]:
        return decode_stream(self, partition, records, chunk_size or self.chunk_size)

    def _pad(self) -> int:
        """Spare bytes the packed values need after the last one (see columnar.Rows)."""
        plans = [w.plan for w in self._writers.values() if w.plan is not None]
        return max([columnar.required_pad(plan) for plan in plans] + [64])

    def _frames(self, values, starts, ends, data) -> tuple[pa.Array, dict[int, str]]:
        """The schema id of each row (null when unframed) and reasons for the unframed."""
        ids, unframed = frame_columns(data, starts, ends)
        reasons: dict[int, str] = {}
        if pc.any(unframed).as_py():
            for i in pc.indices_nonzero(unframed).to_pylist():
                value = values[i].as_py()
                reasons[i] = "null value" if value is None else frame_problem(value)
        return ids, reasons

    def _decode_group(self, writer, values, indices, data, starts, ends, reasons):
        """Decode the rows ``indices`` (all of one writer schema; None: every row): the
        struct of the decoded rows and their indices; reasons filled in for the others."""
        if indices is None:
            indices = pc.cast(arange(len(values)), pa.int64())
            group_starts, group_ends = starts, ends
        else:
            group_starts, group_ends = starts.take(indices), ends.take(indices)
        if writer.plan is not None:
            struct, bad = columnar.decode_rows(
                writer.plan, data, pc.add(group_starts, FRAME_SIZE), group_ends
            )
            if not pc.any(bad).as_py():
                return struct, indices
            good = pc.invert(bad)
            suspects = indices.filter(bad).to_pylist()
            struct, indices = struct.filter(good), indices.filter(good)
        else:
            suspects = indices.to_pylist()
        rescued, rescued_rows = [], []
        for i in suspects:
            try:
                rescued.append(writer.rows.read(values[i].as_py(), FRAME_SIZE))
                rescued_rows.append(i)
            except BadRow as exc:
                reasons[i] = str(exc)
        rescued_struct, misfits = writer.rows.to_arrow_checked(rescued)
        for position in sorted(misfits, reverse=True):
            reasons[rescued_rows.pop(position)] = misfits[position]
        if writer.plan is None:
            return rescued_struct, pa.array(rescued_rows, pa.int64())
        if rescued_rows:
            struct = pa.concat_arrays([struct, rescued_struct])
            indices = pa.concat_arrays([indices, pa.array(rescued_rows, pa.int64())])
            order = pc.sort_indices(indices)
            struct, indices = struct.take(order), indices.take(order)
        return struct, indices
