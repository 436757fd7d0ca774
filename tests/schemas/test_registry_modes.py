"""Modes (READWRITE, READONLY, IMPORT) on a registry served over HTTP, and the leader
election's decisions and messages (pure functions of the members' identities)."""

import httpx
import pytest

from broker.client.group.membership import Generation
from schemas import canonical, catalog
from schemas.registry.election import (
    DUPLICATE_URLS,
    NO_ERROR,
    Assignment,
    ElectionHooks,
    Identity,
    choose_leader,
)
from schemas.registry.errors import RegistryError
from schemas.registry.service import Registry
from schemas.store import InMemoryStore

V1 = catalog.load_str("PageViewEvent.v1")
V2 = catalog.load_str("PageViewEvent.v2")
AUDIT = catalog.load_str("AuditEvent")


@pytest.fixture
def http(running_registry):
    with httpx.Client(base_url=running_registry.url) as client:
        yield client


def error(answer: httpx.Response) -> tuple[int, int]:
    return answer.status_code, answer.json()["error_code"]


def test_read_only_refuses_changes_and_serves_reads(http, registry_server, running_registry):
    first = http.post("/subjects/pv-value/versions", json={"schema": V1}).json()["id"]
    assert http.put("/mode", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert http.get("/mode").json() == {"mode": "READONLY"}
    assert error(http.post("/subjects/pv-value/versions", json={"schema": V2})) == (422, 42205)
    assert error(http.delete("/subjects/pv-value")) == (422, 42205)
    assert error(http.delete("/subjects/pv-value/versions/1")) == (422, 42205)
    assert http.get(f"/schemas/ids/{first}").status_code == 200
    # A subject's own mode wins over the global one, and goes away with DELETE.
    assert http.put("/mode/pv-value", json={"mode": "READWRITE"}).json() == {"mode": "READWRITE"}
    assert http.post("/subjects/pv-value/versions", json={"schema": V2}).json()["id"] == 2
    assert error(http.post("/subjects/other-value/versions", json={"schema": V1})) == (422, 42205)
    assert http.delete("/mode/pv-value").json() == {"mode": "READWRITE"}
    assert http.get("/mode/pv-value").json() == {"mode": "READONLY"}
    assert error(http.delete("/mode/pv-value")) == (404, 40401)
    # Modes are entries of the store: a restarted registry has them.
    with registry_server(running_registry.store) as url:
        assert httpx.get(f"{url}/mode").json() == {"mode": "READONLY"}


def test_bad_modes_are_refused(http):
    assert error(http.put("/mode", json={"mode": "WRITEONLY"})) == (422, 42204)
    assert error(http.put("/mode", json={})) == (422, 422)
    assert error(http.put("/mode", content=b"[")) == (400, 400)
    assert http.get("/mode").json() == {"mode": "READWRITE"}


def test_import_keeps_the_callers_ids_and_versions(http):
    assert http.put("/mode", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    imported = {"schema": V1, "id": 40, "version": 3}
    assert http.post("/subjects/pv-value/versions", json=imported).json() == {"id": 40}
    assert http.get("/subjects/pv-value/versions/3").json()["id"] == 40
    # The same schema and id again is the same registration; another id for it is not.
    assert http.post("/subjects/pv-value/versions", json=imported).json() == {"id": 40}
    clash = {"schema": V1, "id": 41}
    assert error(http.post("/subjects/pv-value/versions", json=clash)) == (422, 42205)
    # An id already naming another schema is refused.
    taken = {"schema": AUDIT, "id": 40}
    assert error(http.post("/subjects/audit-value/versions", json=taken)) == (422, 42205)
    assert error(http.post("/subjects/x-value/versions", json={"schema": V2, "id": 0})) == (
        400,
        400,
    )
    # Back to READWRITE: ids continue after the highest imported, callers choose none.
    assert http.put("/mode", json={"mode": "READWRITE"}).json() == {"mode": "READWRITE"}
    assert http.post("/subjects/audit-value/versions", json={"schema": AUDIT}).json() == {"id": 41}
    chosen = {"schema": V2, "id": 99}
    assert error(http.post("/subjects/pv-value/versions", json=chosen)) == (422, 42205)


def test_import_needs_an_empty_registry_unless_forced(http):
    http.post("/subjects/pv-value/versions", json={"schema": V1}).raise_for_status()
    assert error(http.put("/mode", json={"mode": "IMPORT"})) == (422, 42205)
    assert error(http.put("/mode/pv-value", json={"mode": "IMPORT"})) == (422, 42205)
    assert http.put("/mode/empty-value", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    assert http.put("/mode?force=true", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}


def test_a_registry_without_an_elected_leader_refuses_writes_and_serves_reads():
    store = InMemoryStore()
    alone = Registry(store)
    alone.load()
    alone_schema = canonical.parse(V1)
    alone.register("a-value", alone_schema)
    follower = Registry(store, identity=Identity("127.0.0.1", 1))
    follower.load()
    assert follower.state.id_for(alone_schema) == 1
    with pytest.raises(RegistryError) as refused:
        follower.write_target()
    assert refused.value.code == 50004
    follower.set_leader(Identity("127.0.0.1", 2))
    assert follower.write_target() == Identity("127.0.0.1", 2)
    with pytest.raises(RegistryError) as stale:
        follower.register("b-value", alone_schema)
    assert stale.value.code == 50004


# -- the election -----------------------------------------------------------------


A = Identity("a", 8081)
B = Identity("b", 8081)
C = Identity("c", 8081, leader_eligibility=False)


def test_the_smallest_eligible_url_leads_and_keeps_leading():
    assert choose_leader({"m1": B, "m2": A, "m3": C}, None) == Assignment(NO_ERROR, "m2", A)
    # A member joining (or the group's leader changing) does not move the leadership.
    assert choose_leader({"m1": B, "m2": A}, B) == Assignment(NO_ERROR, "m1", B)
    # A previous leader that is gone, or no longer eligible, is replaced.
    assert choose_leader({"m1": B, "m3": C}, A).leader_identity == B
    assert choose_leader({"m3": C}, None) == Assignment(NO_ERROR, None, None)


def test_two_members_with_one_url_make_no_leader():
    assert choose_leader({"m1": A, "m2": Identity("a", 8081)}, None).error == DUPLICATE_URLS


def test_identities_and_assignments_round_trip_as_json():
    assert Identity.decode(C.encode()) == C
    decided = Assignment(NO_ERROR, "m1", A)
    assert Assignment.decode(decided.encode()) == decided
    for raw in (b"[]", b'{"host": "a"}', b'{"host": "a", "port": "x"}'):
        with pytest.raises(ValueError):
            Identity.decode(raw)
    with pytest.raises(ValueError):
        Assignment.decode(b'{"leader": "m1"}')


def test_the_group_leader_skips_members_without_an_identity():
    registry = Registry(InMemoryStore(), identity=B)
    hooks = ElectionHooks(registry, B)
    members = [
        {"member_id": "m1", "metadata": B.encode()},
        {"member_id": "m2", "metadata": b"garbage"},
    ]
    assignments = hooks.perform_assignment("v0", members)
    assert set(assignments) == {"m1", "m2"}
    hooks.on_join_complete(Generation(1, "m1", "v0"), assignments["m2"])
    assert registry.leader == B and registry.leading
    hooks.on_join_complete(Generation(2, "m1", "v0"), b"not json")  # unreadable: nothing decided
    assert registry.leader == B
