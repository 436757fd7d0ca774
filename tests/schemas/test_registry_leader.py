"""Several registry instances on one `_schemas` topic (issue 12), each its own process on
our broker, used through Confluent's own SchemaRegistryClient: one elected leader hands
out ids, the others forward writes to it; a leader killed with SIGKILL is replaced by
another eligible instance that has read the whole topic first, so no id ever names two
schemas; an instance that is not eligible never leads; a follower that cannot reach the
leader answers with a clear error and loses nothing."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from broker.processes import RegistryProcess

# No election can take longer than a session timeout plus a rejoin; this bounds waits.
SESSION_MS = 6000
SETTLE_S = 60
NOT_ELIGIBLE = {"leader.eligibility": "false"}


def record_schema(name: str) -> str:
    """A distinct Avro record per name (a new schema, so a new id)."""
    fields = [{"name": "n", "type": "long"}, {"name": "tag", "type": "string", "default": name}]
    record = "R_" + name.replace("-", "_")
    return json.dumps({"type": "record", "name": record, "fields": fields})


def start_instances(work, bootstrap, name, own_settings) -> list[RegistryProcess]:
    """One instance per item of `own_settings` (its own keys), side by side on the topic
    and group `name`: started together, each ready once the group has told it who leads."""
    settings = {
        "kafkastore.topic": f"_schemas_{name}",
        "schema.registry.group.id": f"sr-{name}",
        "schema.registry.group.session.timeout.ms": str(SESSION_MS),
        "kafkastore.timeout.ms": "10000",
    }
    instances = [
        RegistryProcess(
            work / f"sr-{i}",
            bootstrap=bootstrap,
            settings={**settings, **own},
        )
        for i, own in enumerate(own_settings)
    ]
    for r in instances:
        r.spawn()
    for r in instances:
        r.wait_until_ready()
    return instances


def announced_leader(instance: RegistryProcess) -> str | None:
    """The leader this instance last learned of (its log says each change)."""
    found = re.findall(r"leader: (\S+)", instance.log_text())
    return None if not found or found[-1] == "None" else found[-1]


def wait_for_leader(instances, among=None) -> RegistryProcess:
    """The instance every live one names as leader, once they agree."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        named = {announced_leader(r) for r in instances if r.proc is not None}
        if len(named) == 1 and None not in named:
            (url,) = named
            leader = next((r for r in (among or instances) if r.url == url), None)
            if leader is not None:
                return leader
        time.sleep(0.2)
    raise AssertionError(f"no agreed leader: {[announced_leader(r) for r in instances]}")


def register(client: SchemaRegistryClient, subject: str, name: str) -> int:
    return client.register_schema(subject, Schema(record_schema(name), "AVRO"))


def wait_until(check, what: str, timeout_s: float = SETTLE_S):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except (SchemaRegistryError, AssertionError, httpx.HTTPError):
            if time.monotonic() > deadline:
                raise AssertionError(f"not {what} within {timeout_s}s") from None
            time.sleep(0.2)


def id_owners(ids: dict[str, int]) -> dict[int, set[str]]:
    owners: dict[int, set[str]] = {}
    for name, schema_id in ids.items():
        owners.setdefault(schema_id, set()).add(name)
    return owners


def everything(url: str) -> dict:
    """What a client sees: every subject's versions with their ids and schema texts."""
    with httpx.Client(base_url=url, timeout=30) as http:
        seen = {}
        for subject in http.get("/subjects?deleted=true").json():
            for v in http.get(f"/subjects/{subject}/versions?deleted=true").json():
                seen[(subject, v)] = http.get(
                    f"/subjects/{subject}/versions/{v}?deleted=true"
                ).json()
        return seen


@pytest.fixture
def stop_all():
    started: list[RegistryProcess] = []
    yield started
    for r in started:
        r.stop()


def test_concurrent_registrations_through_every_instance_get_unique_ids(
    group_broker, tmp_path, stop_all
):
    instances = start_instances(tmp_path, group_broker.bootstrap, "concurrent", [{}] * 3)
    stop_all.extend(instances)
    leader = wait_for_leader(instances)
    results: dict[str, int] = {}
    shared: dict[tuple[int, int], int] = {}
    failures: list[Exception] = []
    lock = threading.Lock()

    def worker(index: int, instance: RegistryProcess) -> None:
        client = SchemaRegistryClient({"url": instance.url})
        try:
            for n in range(15):
                name = f"i{index}-{n}"
                schema_id = register(client, f"{name}-value", name)
                # The same schema through every instance, under one subject each.
                common = register(client, f"common-{index}-{n % 3}-value", f"common-{n % 3}")
                with lock:
                    results[name] = schema_id
                    shared[(index, n % 3)] = common
        except Exception as exc:  # recorded: the assertion below names it
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(i, r)) for i, r in enumerate(instances)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(results) == 45
    assert all(len(names) == 1 for names in id_owners(results).values())
    # One schema, one id, whichever instance it went through.
    for k in range(3):
        assert len({shared[(i, k)] for i in range(3)}) == 1
    assert not set(shared.values()) & set(results.values())
    # Every instance answers the same, the followers from their own replay.
    views = [everything(r.url) for r in instances]
    assert views[0] == views[1] == views[2]
    for r in instances:
        client = SchemaRegistryClient({"url": r.url})
        for name, schema_id in results.items():
            assert json.loads(client.get_schema(schema_id).schema_str) == json.loads(
                record_schema(name)
            )
    followers = [r for r in instances if r is not leader]
    assert all(announced_leader(r) == leader.url for r in followers)


def test_killing_the_leader_never_gives_an_id_to_two_schemas(group_broker, tmp_path, stop_all):
    instances = start_instances(tmp_path, group_broker.bootstrap, "failover", [{}] * 3)
    stop_all.extend(instances)
    leader = wait_for_leader(instances)
    with httpx.Client(base_url=leader.url, timeout=30) as http:
        # The highest id so far deleted for good before the failover: never handed out again.
        doomed = register(SchemaRegistryClient({"url": leader.url}), "doomed-value", "doomed")
        http.delete("/subjects/doomed-value").raise_for_status()
        http.delete("/subjects/doomed-value?permanent=true").raise_for_status()

    ids: dict[str, int] = {}
    errors: list[SchemaRegistryError] = []
    lock = threading.Lock()
    stop = threading.Event()
    counter = itertools.count()

    def worker(instance: RegistryProcess) -> None:
        client = SchemaRegistryClient({"url": instance.url, "timeout": 30})
        while not stop.is_set():
            name = f"s{next(counter)}"
            try:
                schema_id = register(client, f"{name}-value", name)
            except SchemaRegistryError as exc:
                with lock:
                    errors.append(exc)
                time.sleep(0.05)
                continue
            except Exception:  # the killed instance refuses connections: not an answer
                time.sleep(0.05)
                continue
            with lock:
                ids[name] = schema_id

    threads = [threading.Thread(target=worker, args=(r,)) for r in instances for _ in range(2)]
    for t in threads:
        t.start()

    def grown(count: int) -> None:
        with lock:
            assert len(ids) >= count

    wait_until(lambda: grown(20), "20 ids")
    leader.kill()
    survivors = [r for r in instances if r is not leader]
    new_leader = wait_for_leader(survivors)
    assert new_leader is not leader
    before = len(ids)
    wait_until(lambda: grown(before + 20), "20 more ids after the failover")
    stop.set()
    for t in threads:
        t.join()

    owners = id_owners(ids)
    assert all(len(names) == 1 for names in owners.values()), owners
    assert doomed not in owners, "a hard-deleted id was handed out again"
    assert max(owners) > doomed
    # Errors while no leader was known are the forwarding / unknown-leader / timeout ones.
    assert {e.error_code for e in errors} <= {50002, 50003, 50004}, errors
    # Every success is stable: the survivors serve it with the same id, and a registration
    # that failed either did not happen or happened with a stable id of its own.
    client = SchemaRegistryClient({"url": new_leader.url})
    for name, schema_id in ids.items():
        found = client.lookup_schema(f"{name}-value", Schema(record_schema(name), "AVRO"))
        assert found.schema_id == schema_id
    view = everything(new_leader.url)
    all_ids = [v["id"] for v in view.values()]
    assert len(all_ids) == len(set(all_ids))

    # Restart every instance: the same ids everywhere.
    for r in survivors:
        r.stop()
    for r in instances:
        r.spawn()
    for r in instances:
        r.wait_until_ready()
    wait_for_leader(instances)
    for r in instances:
        assert everything(r.url) == view
    after = register(SchemaRegistryClient({"url": instances[0].url}), "after-value", "after")
    assert after > max(all_ids)


def test_an_instance_that_is_not_eligible_never_leads(group_broker, tmp_path, stop_all):
    follower, eligible = start_instances(
        tmp_path, group_broker.bootstrap, "eligibility", [NOT_ELIGIBLE, {}]
    )
    stop_all.extend([follower, eligible])
    assert wait_for_leader([follower, eligible]) is eligible
    client = SchemaRegistryClient({"url": follower.url})
    first = register(client, "a-value", "a")
    # Read-your-writes through the follower: its own replay has it when the answer comes.
    with httpx.Client(base_url=follower.url, timeout=30) as http:
        assert http.get(f"/schemas/ids/{first}").status_code == 200
        assert http.put("/config/a-value", json={"compatibility": "NONE"}).json() == {
            "compatibility": "NONE"
        }
        assert http.get("/config/a-value").json() == {"compatibilityLevel": "NONE"}
        # Deletes go through too, query parameters and all.
        register(client, "d-value", "d")
        assert http.delete("/subjects/d-value").json() == [1]
        assert http.delete("/subjects/d-value?permanent=true").json() == [1]
        assert http.get("/subjects?deleted=true").json() == ["a-value"]

    eligible.kill()
    # No leader: writes fail with "unknown leader", reads keep working.
    with httpx.Client(base_url=follower.url, timeout=30) as http:
        wait_until(lambda: _assert_error(http.post("/subjects/b-value/versions",
                   json={"schema": record_schema("b")}), 50004), "unknown leader")  # fmt: skip
        assert http.get(f"/schemas/ids/{first}").status_code == 200
        assert http.get("/subjects").json() == ["a-value"]
    assert announced_leader(follower) is None

    eligible.start()
    assert wait_for_leader([follower, eligible]) is eligible
    second = wait_until(lambda: register(client, "b-value", "b"), "a leader again")
    assert second > first
    assert follower.url not in re.findall(r"leader: (\S+)", follower.log_text())
    assert follower.url not in re.findall(r"leader: (\S+)", eligible.log_text())


def _assert_error(answer: httpx.Response, code: int) -> None:
    assert answer.json().get("error_code") == code, answer.text


def test_a_follower_that_cannot_reach_the_leader_fails_clearly_and_loses_nothing(
    group_broker, tmp_path, stop_all
):
    # The leader announces a host it does not listen on: its followers cannot reach it.
    leader, follower = start_instances(
        tmp_path, group_broker.bootstrap, "unreachable", [{"host.name": "127.0.0.2"}, NOT_ELIGIBLE]
    )
    stop_all.extend([leader, follower])
    with httpx.Client(base_url=follower.url, timeout=30) as http:
        answer = wait_until(
            lambda: _forwarding_error(http.post("/subjects/x-value/versions",
                                                json={"schema": record_schema("x")})),
            "a forwarding error",
        )  # fmt: skip
        assert answer.status_code == 500
        assert "forwarding the request to the leader" in answer.json()["message"]
        assert "127.0.0.2" in answer.json()["message"]
        # Bad input is refused here, before any forwarding.
        bad = http.post("/subjects/x-value/versions", content=b"{not json")
        assert bad.json()["error_code"] == 400
    # Nothing was lost or half-made: the leader (reached directly) registers it as id 1,
    # and the follower then serves it from its replay.
    with httpx.Client(base_url=leader.url, timeout=30) as http:
        assert http.get("/subjects").json() == []
        registered = http.post("/subjects/x-value/versions", json={"schema": record_schema("x")})
        assert registered.json() == {"id": 1}
    with httpx.Client(base_url=follower.url, timeout=30) as http:
        wait_until(lambda: _assert_ok(http.get("/schemas/ids/1")), "replayed")


def _forwarding_error(answer: httpx.Response) -> httpx.Response:
    _assert_error(answer, 50003)
    return answer


def _assert_ok(answer: httpx.Response) -> None:
    assert answer.status_code == 200, answer.text
