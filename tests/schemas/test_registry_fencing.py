"""The registry leader's fencing token (schemas/registry/fencing.py): two `Registry`
objects on one in-memory store, one of them a zombie (it still believes it leads after
another instance was elected, as a paused process does before its heartbeat notices).
The process-level version (SIGSTOP of the leader's process, election, SIGCONT) is in
tests/faults/test_faults_registry.py."""

from __future__ import annotations

import json

import pytest

from schemas import canonical
from schemas.compatibility import Level
from schemas.registry.election import Identity
from schemas.registry.errors import RegistryError
from schemas.registry.fencing import Fence, marker_key, marker_value
from schemas.registry.service import Registry
from schemas.registry.state import schema_key
from schemas.store import InMemoryStore

A, B = Identity("127.0.0.1", 1), Identity("127.0.0.1", 2)


def schema(name: str) -> canonical.ParsedSchema:
    return canonical.parse(
        json.dumps({"type": "record", "name": name, "fields": [{"name": "n", "type": "long"}]})
    )


def instances() -> tuple[InMemoryStore, Registry, Registry]:
    store = InMemoryStore()
    return store, Registry(store, Level.NONE, identity=A), Registry(store, Level.NONE, identity=B)


def ids_seen(registry: Registry) -> dict[tuple[str, int], int]:
    registry.wait_for(registry.store.end_offset())
    return {
        (s, v.version): v.id
        for s in registry.state.subjects(deleted=True)
        for v in registry.state.all_versions(s)
    }


def test_a_superseded_leader_cannot_write_and_every_reader_agrees():
    store, a, b = instances()
    for r in (a, b):
        r.set_leader(A)
    assert a.register("s", schema("One")) == 1
    b.set_leader(B)  # B elected; A was paused and was never told
    assert b.register("s", schema("Two")) == 2
    with pytest.raises(RegistryError) as refused:
        a.register("s", schema("Three"))  # the zombie computes id 2 / version 2 again
    assert refused.value.code == 50004
    assert "fenced" in refused.value.message
    # It stays fenced until the election names it again, and writes no new marker.
    end = store.end_offset()
    with pytest.raises(RegistryError):
        a.register("s", schema("Four"))
    assert store.end_offset() == end
    fresh = Registry(store, identity=Identity("127.0.0.1", 3))
    assert ids_seen(a) == ids_seen(b) == ids_seen(fresh) == {("s", 1): 1, ("s", 2): 2}


def test_a_zombie_write_that_lands_is_dropped_and_the_shadowed_key_is_written_again():
    """A paused leader's append that reaches the log after the new leader's marker (it was
    in flight) is dropped by every reader; since it has the key of an admitted entry, the
    new leader appends the admitted value again, so compaction keeps that one."""
    store, a, b = instances()
    for r in (a, b):
        r.set_leader(A)
    a.register("s", schema("One"))
    b.set_leader(B)
    b.register("t", schema("Two"))
    epoch_of_a = a._epoch
    shadow = {"subject": "s", "version": 1, "id": 9, "schema": '"string"', "deleted": False}
    store.append(schema_key("s", 1), shadow, epoch_of_a)  # the zombie's in-flight append
    b.wait_for(store.end_offset())  # its reader (a tail thread in a server) saw it
    b.register("t", schema("Two"))  # an idempotent write: the repair goes first
    last = store.read(store.end_offset() - 1, 0)[0][-1]
    assert last.key == schema_key("s", 1) and last.value["id"] == 1
    assert last.epoch == b._epoch
    assert ids_seen(b)[("s", 1)] == 1
    assert ids_seen(Registry(store, identity=A))[("s", 1)] == 1


def test_markers_are_admitted_only_above_the_current_epoch():
    fence = Fence()
    assert fence.admit(0, marker_key("x"), marker_value(1, "x", "a", 5), None)
    assert not fence.admit(1, marker_key("y"), marker_value(1, "y", "b", 6), None)  # a race
    assert fence.admit(2, marker_key("z"), marker_value(2, "z", "b", 6), None)
    assert fence.current.nonce == "z"
    assert not fence.admit(3, {"keytype": "CONFIG", "subject": None, "magic": 0}, {}, 1)
    assert fence.admit(4, {"keytype": "CONFIG", "subject": None, "magic": 0}, {}, 2)
    assert fence.admit(5, {"keytype": "CONFIG", "subject": None, "magic": 0}, {}, None)
