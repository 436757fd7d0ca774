"""Checkers: pure functions from a history (and the final reads a workload made) to the
anomalies found. Each anomaly names its kind and what was seen, so a report can list it.

- `producer_anomalies`: acknowledged writes lost (or found elsewhere than acknowledged),
  duplicates under idempotence, offsets or values out of order per partition;
- `group_anomalies`: two members owning one partition in one generation, committed
  offsets going backwards, acknowledged commits the group no longer has;
- `transaction_anomalies`: consume-transform-produce exactly once: acknowledged input
  lost or copied twice, out of order, an aborted transaction's output visible, a
  committed one's missing;
- `registry_anomalies`: one id for two schemas, one schema under two ids in a subject,
  acknowledged registrations missing, instances that disagree;
- `hourly_anomalies`: the hourly load: acknowledged records not loaded, loaded twice,
  loaded from elsewhere than acknowledged or into another hour than their event hour;
  committed offsets going backwards or skipping; committed loads missing; the audit
  failing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from tests.faults.history import INFO, OK, History


@dataclass(frozen=True)
class Anomaly:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def _limit(found: list[Anomaly], most: int = 50) -> list[Anomaly]:
    """Many anomalies of one run usually share a cause: the first ones say it, and one
    more counts the rest by kind (a report must say how many writes were lost)."""
    if len(found) <= most:
        return found
    rest = Counter(a.kind for a in found[most:])
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(rest.items()))
    return [*found[:most], Anomaly("more", f"{len(found) - most} not listed: {summary}")]


def total(found: list[Anomaly]) -> int:
    """How many anomalies `found` stands for, those only counted (`_limit`) included."""
    if found and found[-1].kind == "more":
        return len(found) - 1 + int(found[-1].detail.split()[0])
    return len(found)


# -- an idempotent producer with numbered values ------------------------------------------


def _out_of_order(partition: int, records: list[tuple[int, int]]) -> list[Anomaly]:
    """Offsets and values going backwards in one partition's final read, (offset, number)
    in the order the consumer got them."""
    found: list[Anomaly] = []
    last_offset, last_number = -1, -1
    for offset, number in records:
        if offset <= last_offset:
            found.append(Anomaly("offset-order", f"p{partition}: {offset} after {last_offset}"))
        if number <= last_number:
            found.append(
                Anomaly("value-order", f"p{partition}@{offset}: {number} after {last_number}")
            )
        last_offset, last_number = offset, number
    return found


def producer_anomalies(history: History, read: dict[int, list[tuple[int, int]]]) -> list[Anomaly]:
    """`history`: "send" ops whose ok value is (number, partition, offset); `read`: the
    final read, partition -> [(offset, number)] in the order the consumer got them."""
    found: list[Anomaly] = []
    where: dict[int, list[tuple[int, int]]] = defaultdict(list)
    at: dict[tuple[int, int], int] = {}
    for partition, records in read.items():
        found += _out_of_order(partition, records)
        for offset, number in records:
            where[number].append((partition, offset))
            at[(partition, offset)] = number
    for number, places in sorted(where.items()):
        if len(places) > 1:
            found.append(Anomaly("duplicate", f"value {number} at {places}"))
    for op in history.of("send", OK):
        number, partition, offset = op.value
        if number not in where:
            found.append(Anomaly("lost", f"value {number} acknowledged at p{partition}@{offset}"))
        elif (
            # librdkafka acknowledges without an offset (None) what it knows was persisted
            # because a later batch of the same producer was (its "implicit ack" after a
            # retry): then only the partition can be checked.
            at.get((partition, offset)) != number
            if offset is not None
            else all(p != partition for p, _ in where[number])
        ):
            found.append(
                Anomaly(
                    "moved",
                    f"value {number} acknowledged at p{partition}@{offset}, read at "
                    f"{where[number]}",
                )
            )
    return _limit(found)


# -- a consumer group committing offsets ----------------------------------------------------


def group_anomalies(history: History, final_commits: dict[int, int]) -> list[Anomaly]:
    """`history`: "assign" ok values (generation, member, [partitions]) and "commit" ok
    values (member, generation, {partition: offset}); `final_commits`: the group's
    committed offsets read at the end."""
    found: list[Anomaly] = []
    owners: dict[tuple[int, int], set[str]] = defaultdict(set)
    for op in history.of("assign", OK):
        generation, member, partitions = op.value
        for p in partitions:
            owners[(generation, p)].add(member)
    for (generation, p), members in sorted(owners.items()):
        if len(members) > 1:
            found.append(
                Anomaly("double-ownership", f"p{p} in generation {generation}: {sorted(members)}")
            )
    highest: dict[int, tuple[int, str, int]] = {}
    for op in history.of("commit", OK):
        member, generation, offsets = op.value
        for p, offset in sorted(offsets.items()):
            before = highest.get(p)
            if before is not None and offset < before[0]:
                found.append(
                    Anomaly(
                        "commit-backwards",
                        f"p{p}: {member} (generation {generation}) committed {offset} after "
                        f"{before[1]} (generation {before[2]}) committed {before[0]}",
                    )
                )
            if before is None or offset >= before[0]:
                highest[p] = (offset, member, generation)
    for p, (offset, member, generation) in sorted(highest.items()):
        if final_commits.get(p, -1) < offset:
            found.append(
                Anomaly(
                    "commit-lost",
                    f"p{p}: {offset} acknowledged to {member} (generation {generation}), the "
                    f"group has {final_commits.get(p)}",
                )
            )
    return _limit(found)


# -- transactional consume-transform-produce ----------------------------------------------


def transaction_anomalies(
    history: History, read: dict[int, list[tuple[int, tuple[int, int]]]]
) -> list[Anomaly]:
    """`history`: the input's "send" ops (ok value (number, partition, offset)) and the
    copier's "txn" ops (ok / fail / info value (txn, [(partition, number), ...], ...));
    `read`: the output topic read read_committed, partition -> [(offset, (number, txn))].
    Exactly once: every acknowledged input number in the output once, in its input's
    partition, in order; nothing of an aborted transaction visible; everything of a
    committed one visible; nothing from a transaction never attempted."""
    found: list[Anomaly] = []
    status: dict[int, str] = {}
    contents: dict[int, list[tuple[int, int]]] = {}
    for op in history.ops:
        if op.f == "txn" and op.type != "invoke":
            status[op.value[0]] = op.type
            contents[op.value[0]] = [tuple(v) for v in op.value[1]]
    where: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    visible: set[tuple[int, int]] = set()
    for partition, records in read.items():
        found += _out_of_order(partition, [(offset, number) for offset, (number, _) in records])
        for offset, (number, txn) in records:
            where[number].append((partition, offset, txn))
            visible.add((txn, number))
            kind = status.get(txn)
            if kind == "fail":
                found.append(Anomaly("aborted-read", f"value {number} of aborted txn {txn}"))
            elif kind is None:
                found.append(Anomaly("phantom", f"value {number} of txn {txn}, never completed"))
    for number, places in sorted(where.items()):
        if len(places) > 1:
            found.append(Anomaly("duplicate", f"value {number} at {places} (p, offset, txn)"))
    for op in history.of("send", OK):
        number, partition, _ = op.value
        if number not in where:
            found.append(Anomaly("lost", f"value {number} acknowledged into p{partition}"))
        elif any(p != partition for p, _, _ in where[number]):
            found.append(Anomaly("moved", f"value {number} from p{partition} at {where[number]}"))
    for txn, kind in sorted(status.items()):
        if kind == OK:
            missing = [n for _, n in contents[txn] if (txn, n) not in visible]
            if missing:
                found.append(
                    Anomaly(
                        "committed-lost", f"txn {txn}: {len(missing)} of its values, {missing[:5]}"
                    )
                )
    return _limit(found)


# -- the schema registry ---------------------------------------------------------------------


def registry_anomalies(
    history: History, views: dict[str, dict[tuple[str, int], tuple[int, str]]]
) -> list[Anomaly]:
    """`history`: "register" ok values (subject, schema name, id); `views`: each
    instance's final view, (subject, version) -> (id, schema name)."""
    found: list[Anomaly] = []
    names = list(views)
    for other in names[1:]:
        if views[other] != views[names[0]]:
            diff = set(views[other].items()) ^ set(views[names[0]].items())
            found.append(Anomaly("divergent", f"{other} vs {names[0]}: {sorted(diff)[:5]}"))
    seen = views[names[0]] if names else {}
    schemas_of_id: dict[int, set[str]] = defaultdict(set)
    ids_in_subject: dict[tuple[str, str], set[int]] = defaultdict(set)
    for (subject, _), (schema_id, name) in seen.items():
        schemas_of_id[schema_id].add(name)
        ids_in_subject[(subject, name)].add(schema_id)
    acked: dict[tuple[str, str], set[int]] = defaultdict(set)
    for op in history.of("register", OK):
        subject, name, schema_id = op.value
        schemas_of_id[schema_id].add(name)
        acked[(subject, name)].add(schema_id)
        ids_in_subject[(subject, name)].add(schema_id)
    for schema_id, schema_names in sorted(schemas_of_id.items()):
        if len(schema_names) > 1:
            found.append(Anomaly("id-reused", f"id {schema_id} names {sorted(schema_names)}"))
    for (subject, name), ids in sorted(ids_in_subject.items()):
        if len(ids) > 1:
            found.append(Anomaly("two-ids", f"{name} under {subject} has ids {sorted(ids)}"))
    visible = {(subject, name) for (subject, _), (_, name) in seen.items()}
    for key in sorted(acked):
        if key not in visible:
            found.append(Anomaly("lost-registration", f"{key[1]} under {key[0]}"))
    return _limit(found)


# -- the hourly load --------------------------------------------------------------------------


def hourly_anomalies(
    history: History,
    rows: list[tuple[int, int, int, str]],
    ledgers: list[tuple[str, str, dict[int, tuple[int, int]]]],
) -> list[Anomaly]:
    """`history`: "send" ok values (number, partition, offset, event hour), "load" ok
    values (run id, {partition: (first, next)}), "audit" ok value [(hour, complete,
    reasons)]; `rows`: every loaded row, (number, partition, offset, hour of its
    directory); `ledgers`: the committed runs in commit order, (run id, kind,
    {partition: (first, next)}). Exactly once, in the right hour: the union of the loads
    is the acknowledged records (and only records that were sent), each once; each run
    starts every partition where the one before ended; every load reported committed is;
    the audit finds every hour complete. A load that failed counts for nothing (its files
    were never committed); a send whose outcome is unknown may be loaded or not, and then
    an audit count below what was loaded is its doing, not the load's (noted, not an
    anomaly)."""
    found: list[Anomaly] = []
    loaded: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for number, partition, offset, hour in rows:
        loaded[number].append((partition, offset, hour))
    for number, places in sorted(loaded.items()):
        if len(places) > 1:
            found.append(Anomaly("duplicate", f"record {number} loaded at {places}"))
    invoked = {op.value for op in history.of("send", "invoke")}
    for number in sorted(set(loaded) - invoked):
        found.append(Anomaly("phantom", f"record {number} loaded, never sent"))
    for op in history.of("send", OK):
        number, partition, offset, hour = op.value
        places = loaded.get(number)
        if not places:
            found.append(Anomaly("lost", f"record {number} acknowledged at p{partition}@{offset}"))
            continue
        p, o, h = places[0]
        if (p, o) != (partition, offset):
            found.append(
                Anomaly(
                    "moved",
                    f"record {number} acknowledged at p{partition}@{offset}, loaded from p{p}@{o}",
                )  # fmt: skip
            )
        if h != hour:
            found.append(Anomaly("wrong-hour", f"record {number} of hour {hour} loaded into {h}"))
    ends: dict[int, tuple[int, str]] = {}
    for run, kind, ranges in ledgers:
        for p, (first, nxt) in sorted(ranges.items()):
            if nxt < first:
                found.append(Anomaly("offsets-backwards", f"{run} p{p}: [{first}, {nxt})"))
            before = ends.get(p)
            if before is not None and first != before[0] and kind == "load":
                kind_ = "offsets-backwards" if first < before[0] else "offsets-skipped"
                found.append(
                    Anomaly(
                        kind_, f"{run} p{p} starts at {first}, {before[1]} ended at {before[0]}"
                    )  # fmt: skip
                )
            ends[p] = (nxt, run)
    committed = {run: ranges for run, _, ranges in ledgers}
    for op in history.of("load", OK):
        run, ranges = op.value
        if committed.get(run) != {int(p): tuple(r) for p, r in ranges.items()}:
            found.append(Anomaly("load-not-committed", f"{run} reported {ranges}, "
                                 f"committed {committed.get(run)}"))  # fmt: skip
    audits = history.of("audit", OK)
    if not audits:
        found.append(Anomaly("audit", "no audit verdict"))
    unknown = history.of("send", INFO)
    for hour, complete, reasons in audits[-1].value if audits else ():
        if not complete and not (unknown and all("more than produced" in r for r in reasons)):
            found.append(Anomaly("audit", f"{hour} incomplete: {'; '.join(reasons)}"))
    return _limit(found)
