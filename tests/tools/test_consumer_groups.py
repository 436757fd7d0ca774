"""`python -m broker.tools consumer-groups` against a broker process, with groups made by
confluent-kafka consumers and checked with kafka-python: list, describe (offsets, lag,
members and their assignments, state), reset in every mode (a dry run changes nothing,
--execute commits what the plan printed and a new member starts there), delete a group
and its offsets (refused while the group is active), bad arguments."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.client.admin import AdminClient
from broker.client.producer import Producer
from broker.tools.consumer_groups import main
from broker.util.clock import HOUR_MS, now_ms
from tests.helpers.group_clients import (
    ConfluentGroup,
    first_offsets,
    fresh,
    topic_with_records,
)

pytestmark = pytest.mark.clients

ROOT = Path(__file__).resolve().parents[2]

COUNTS = [5, 7, 3]  # records per partition of each test's topic


def ends(topic: str) -> dict[tuple[str, int], int]:
    return {(topic, p): n for p, n in enumerate(COUNTS)}


@pytest.fixture(scope="module")
def broker(group_broker):
    return group_broker


@pytest.fixture
def admin(broker):
    with AdminClient(broker.bootstrap) as client:
        yield client


@pytest.fixture
def tool(broker, capsys):
    """tool(*args) -> (exit code, stdout, stderr) of the command against the broker."""

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["--bootstrap-server", broker.bootstrap, *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def table(out: str) -> list[dict[str, str]]:
    """The rows of the tool's last table, keyed by its header (only the last column's
    values may have spaces)."""
    lines = out.strip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.split()[:1] in (["GROUP"], ["TOPIC"]))
    header = lines[start].split()
    rows = [line.split(None, len(header) - 1) for line in lines[start + 1 :] if line.strip()]
    return [dict(zip(header, cells, strict=True)) for cells in rows]


@pytest.fixture
def stable_group(broker):
    """A group of two confluent-kafka members that consumed and committed everything of a
    three-partition topic, still in the group: (group, topic, members)."""
    topic = topic_with_records(broker.bootstrap, COUNTS)
    group = fresh("stable")
    with ConfluentGroup(broker.bootstrap, group, [topic], members=2) as members:
        members.consume(ends(topic))
        members.commit()
        yield group, topic, members


@pytest.fixture
def empty_group(broker):
    """A group whose two members consumed a three-partition topic and left, its committed
    offsets then set to 2, 3 and 1: (group, topic)."""
    topic = topic_with_records(broker.bootstrap, COUNTS)
    group = fresh("empty")
    with ConfluentGroup(broker.bootstrap, group, [topic], members=2) as members:
        members.consume(ends(topic))
        members.commit()
    with AdminClient(broker.bootstrap) as admin:
        admin.alter_group_offsets(
            group, {(topic, 0): 2, (topic, 1): 3, (topic, 2): 1}, raise_errors=True
        )
    return group, topic


def committed(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    return {tp: c.offset for tp, c in admin.list_group_offsets(group).items()}


# -- list and describe ---------------------------------------------------------------------


def test_list(tool, stable_group, empty_group):
    stable, empty = stable_group[0], empty_group[0]
    code, out, _ = tool("--list")
    assert code == 0
    assert {stable, empty} <= set(out.split())

    code, out, _ = tool("--list", "--state")
    states = {row["GROUP"]: row["STATE"] for row in table(out)}
    assert code == 0 and states[stable] == "Stable" and states[empty] == "Empty"

    code, out, _ = tool("--list", "--state", "empty")  # any case, as Kafka
    listed = {row["GROUP"] for row in table(out)}
    assert code == 0 and empty in listed and stable not in listed


def test_describe_offsets_of_a_stable_group(tool, admin, stable_group):
    group, topic, members = stable_group
    code, out, err = tool("--describe", "--group", group)
    assert code == 0, err
    rows = table(out)
    assert sorted(int(r["PARTITION"]) for r in rows) == [0, 1, 2]
    described = admin.describe_groups([group])[group]
    owner = {tp: m.member_id for m in described.members for tp in m.assignment}
    for row in rows:
        p = int(row["PARTITION"])
        assert row["GROUP"] == group and row["TOPIC"] == topic
        assert int(row["CURRENT-OFFSET"]) == int(row["LOG-END-OFFSET"]) == COUNTS[p]
        assert row["LAG"] == "0"
        assert row["CONSUMER-ID"] == owner[(topic, p)]
        assert row["HOST"] == "/127.0.0.1"
        assert row["CLIENT-ID"].startswith("member-")
    # Members with the most partitions first (range gives one member two of three).
    first_owner = rows[0]["CONSUMER-ID"]
    assert sum(r["CONSUMER-ID"] == first_owner for r in rows) == 2


def test_describe_shows_lag(tool, broker, stable_group):
    group, topic, _ = stable_group
    with Producer(broker.bootstrap) as producer:
        for _ in range(4):
            producer.send(topic, b"late", partition=1)
        producer.flush(30)
    code, out, _ = tool("--describe", "--group", group, "--offsets")
    row = next(r for r in table(out) if r["PARTITION"] == "1")
    assert code == 0
    assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == ("7", "11", "4")


def test_describe_members_and_state(tool, admin, stable_group):
    group, topic, _ = stable_group
    code, out, _ = tool("--describe", "--group", group, "--members", "--verbose")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split() == [
        "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"
    ]  # fmt: skip
    described = admin.describe_groups([group])[group]
    assert len(lines) == 1 + len(described.members) == 3
    assignments = set()
    for line in lines[1:]:
        gid, member_id, host, client_id, count, *assignment = line.split()
        member = next(m for m in described.members if m.member_id == member_id)
        assert (gid, host, client_id) == (group, member.host, member.client_id)
        assert int(count) == len(member.assignment)
        parts = sorted(p for _, p in member.assignment)
        assert " ".join(assignment) == f"{topic}({','.join(map(str, parts))})"
        assignments |= set(member.assignment)
    assert assignments == {(topic, p) for p in range(3)}  # each partition to one member

    code, out, _ = tool("--describe", "--group", group, "--state")
    header, row = out.strip().splitlines()
    assert code == 0 and header.split()[:3] == ["GROUP", "COORDINATOR", "(ID)"]
    cells = row.split()
    coordinator = described.coordinator
    assert cells == [group, f"{coordinator.host}:{coordinator.port}", f"({coordinator.node_id})",
                     "range", "Stable", "2"]  # fmt: skip


def test_describe_empty_group_and_all_groups(tool, empty_group, stable_group):
    group, topic = empty_group
    code, out, err = tool("--describe", "--group", group)
    assert code == 0
    assert f"Consumer group '{group}' has no active members." in err
    rows = table(out)
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"], r["CONSUMER-ID"]) for r in rows] == [
        ("0", "2", "3", "-"),
        ("1", "3", "4", "-"),
        ("2", "1", "2", "-"),
    ]
    code, out, _ = tool("--describe", "--group", group, "--members")
    assert code == 0 and out.strip() == ""  # no members, nothing to list

    code, out, _ = tool("--describe", "--all-groups")
    described = {r["GROUP"] for line in out.split("\n\n") if line.strip() for r in table(line)}
    assert code == 0 and {group, stable_group[0]} <= described


# -- reset ---------------------------------------------------------------------------------


def plan(out: str) -> dict[tuple[str, int], int]:
    return {(r["TOPIC"], int(r["PARTITION"])): int(r["NEW-OFFSET"]) for r in table(out)}


@pytest.mark.parametrize(
    "scenario, expected",
    [
        (["--to-earliest"], [0, 0, 0]),
        (["--to-latest"], COUNTS),
        (["--to-offset", "4"], [4, 4, 3]),  # clamped to partition 2's end
        (["--shift-by", "-2"], [0, 1, 0]),  # committed 2, 3, 1; clamped to the log start
        (["--shift-by", "3"], [5, 6, 3]),
    ],
    ids=["earliest", "latest", "offset", "shift-back", "shift-forward"],
)
def test_reset_dry_run_then_execute(tool, admin, broker, empty_group, scenario, expected):
    group, topic = empty_group
    before = committed(admin, group)
    code, out, err = tool("--reset-offsets", "--group", group, "--topic", topic, *scenario)
    assert code == 0, err
    assert "--execute option is missing" in err
    want = {(topic, p): o for p, o in enumerate(expected)}
    assert plan(out) == want
    assert committed(admin, group) == before  # a dry run changes nothing

    code, out, err = tool(
        "--reset-offsets", "--group", group, "--topic", topic, *scenario, "--execute"
    )
    assert code == 0, err
    assert plan(out) == want
    assert committed(admin, group) == want
    assert first_offsets(broker.bootstrap, group, topic, 3) == dict(enumerate(expected))


def test_reset_clamps_with_warnings(tool, empty_group):
    group, topic = empty_group
    code, out, err = tool(
        "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-offset", "99"
    )
    assert code == 0
    assert plan(out) == {(topic, 0): 5}
    assert f"New offset (99) is higher than latest offset for topic partition {topic}-0" in err
    code, out, err = tool(
        "--reset-offsets", "--group", group, "--topic", f"{topic}:2", "--shift-by", "-9"
    )
    assert plan(out) == {(topic, 2): 0}
    assert f"New offset (-8) is lower than earliest offset for topic partition {topic}-2" in err


def test_reset_to_datetime(tool, admin, broker):
    base = now_ms() - 10 * HOUR_MS
    stamps = [base + i * HOUR_MS for i in range(6)]  # records 0-5 an hour apart
    topic = topic_with_records(broker.bootstrap, [6, 2], timestamps=stamps)
    group = fresh("datetime")

    def at(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]

    # Between record 2 and 3: partition 0 starts at 3, partition 1 (records 0-1) at its end.
    when = at(stamps[2] + 1)
    code, out, err = tool(
        "--reset-offsets", "--group", group, "--all-topics", "--to-datetime", when
    )
    assert code == 0 and out.strip() == ""  # a new group has committed nothing: no partitions
    code, out, err = tool(
        "--reset-offsets", "--group", group, "--topic", topic, "--to-datetime", when, "--execute"
    )
    assert code == 0, err
    assert plan(out) == {(topic, 0): 3, (topic, 1): 2}
    assert committed(admin, group) == {(topic, 0): 3, (topic, 1): 2}
    assert first_offsets(broker.bootstrap, group, topic, 2) == {0: 3, 1: 2}
    # A time with a zone: just before record 4, written two hours ahead of UTC.
    text = at(stamps[4] - 1 + 2 * HOUR_MS) + "+02:00"
    code, out, _ = tool("--reset-offsets", "--group", group, "--all-topics", "--to-datetime", text)
    assert plan(out) == {(topic, 0): 4, (topic, 1): 2}


def test_reset_refused_while_the_group_is_active(tool, admin, stable_group):
    group, topic, _ = stable_group
    before = committed(admin, group)
    code, out, err = tool(
        "--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute"
    )
    assert code == 1
    assert (
        f"Error: Assignments can only be reset if the group '{group}' is inactive, "
        "but the current state is Stable." in err
    )
    assert out.strip() == ""
    assert committed(admin, group) == before


def test_reset_errors(tool, admin, empty_group):
    group, topic = empty_group
    before = committed(admin, group)
    missing = fresh("missing")
    code, _, err = tool(
        "--reset-offsets", "--group", group, "--topic", missing, "--to-earliest", "--execute"
    )
    assert code == 1 and f"does not exist: {missing}" in err
    code, _, err = tool(
        "--reset-offsets", "--group", group, "--topic", f"{topic}:0,7", "--to-earliest", "--execute"
    )
    assert code == 1 and f"{topic}-7" in err
    other = fresh("nothing-committed")
    code, _, err = tool("--reset-offsets", "--group", other, "--topic", topic, "--shift-by", "1")
    assert code == 1 and "since there is no current committed offset" in err
    assert committed(admin, group) == before


# -- delete --------------------------------------------------------------------------------


def test_delete_refused_while_active(tool, admin, stable_group):
    group, topic, _ = stable_group
    before = committed(admin, group)
    code, out, err = tool("--delete", "--group", group)
    assert code == 1
    assert "Error: Deletion of some consumer groups failed:" in err
    assert f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP" in out

    code, out, err = tool("--delete-offsets", "--group", group, "--topic", topic)
    assert code == 1
    assert "Encounter some partition level error" in err
    assert {r["PARTITION"] for r in table(out)} == {"0", "1", "2"}
    assert "Error: The group is subscribed to the topic" in out
    assert committed(admin, group) == before


def test_delete_offsets_then_group(tool, admin, empty_group):
    group, topic = empty_group
    missing = fresh("missing")
    code, out, err = tool(
        "--delete-offsets", "--group", group, "--topic", f"{topic}:0", "--topic", missing
    )
    assert code == 1  # the missing topic is an error, partition 0 is still deleted
    statuses = {(r.split()[0], r.split()[1]) for r in out.strip().splitlines()[1:]}
    assert statuses == {(topic, "0"), (missing, "Not")}  # "Not Provided"
    assert f"{topic} 0 Successful" in " ".join(out.split())
    assert committed(admin, group) == {(topic, 1): 3, (topic, 2): 1}

    code, out, err = tool("--delete-offsets", "--group", group, "--topic", f"{topic}:1")
    assert code == 0, err
    assert f"Request succeed for deleting offsets with topic {topic} group {group}" in out
    assert committed(admin, group) == {(topic, 2): 1}

    code, out, err = tool("--delete", "--group", group)
    assert code == 0, err
    assert out.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    assert committed(admin, group) == {}
    assert group not in tool("--list")[1].split()
    code, _, err = tool("--describe", "--group", group)
    assert code == 1 and f"Error: Consumer group '{group}' does not exist." in err
    code, _, err = tool("--delete-offsets", "--group", group, "--topic", topic)
    assert code == 1 and f"Error: '{group}' does not exist." in err


# -- bad arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "exactly one action"),
        (["--list", "--describe", "--group", "g"], "exactly one action"),
        (["--describe"], "--describe needs --group or --all-groups"),
        (["--describe", "--group", "g", "--members", "--state"], "at most one of"),
        (["--describe", "--group", "g", "--state", "Stable"], "no value for --state"),
        (["--list", "--state", "stable,asleep"], "invalid state list"),
        (["--reset-offsets", "--group", "g", "--to-earliest"], "one of --topic and --all-topics"),
        (["--reset-offsets", "--group", "g", "--all-topics"], "exactly one of --to-earliest"),
        (
            ["--reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--to-earliest"],
            "exactly one of --to-earliest",
        ),
        (
            [
                "--reset-offsets",
                "--group",
                "g",
                "--all-topics",
                "--to-latest",
                "--dry-run",
                "--execute",
            ],
            "not both",
        ),
        (
            ["--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "yesterday"],
            "is not a date-time",
        ),
        (["--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "x"], "invalid int"),
        (["--reset-offsets", "--group", "g", "--topic", "t:a", "--to-latest"], "TOPIC:PARTITION"),
        (
            ["--reset-offsets", "--group", "g", "--topic", "bad/name", "--to-latest"],
            "may contain only",
        ),
        (["--delete-offsets", "--group", "g"], "--delete-offsets needs --topic"),
        (
            ["--delete-offsets", "--group", "g", "--group", "h", "--topic", "t"],
            "exactly one --group",
        ),
        (["--delete", "--group", "g", "--all-groups"], "exclude each other"),
        (["--list", "--to-earliest"], "--list takes no --to-earliest"),
        (["--describe", "--group", "g", "--topic", "t"], "--describe takes no --topic"),
    ],  # fmt: skip
)
def test_bad_arguments(broker, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["--bootstrap-server", broker.bootstrap, *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "usage:" in err


def test_as_a_command(broker, stable_group):
    """The module entry point, as an operator runs it."""
    group = stable_group[0]
    command = [sys.executable, "-m", "broker.tools", "consumer-groups", "--bootstrap-server"]
    done = subprocess.run([*command, broker.bootstrap, "--list"], capture_output=True, text=True)
    assert done.returncode == 0 and group in done.stdout.split()
    done = subprocess.run(
        [*command, broker.bootstrap, "--describe", "--group", fresh("nope")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "does not exist" in done.stderr
    # No broker there: a clear error, exit code 1.
    done = subprocess.run(
        [*command, "127.0.0.1:1", "--list", "--timeout", "500"], capture_output=True, text=True
    )
    assert (
        done.returncode == 1 and done.stderr.startswith("Error: ") and "127.0.0.1:1" in done.stderr
    )
    done = subprocess.run([sys.executable, "-m", "broker.tools"], capture_output=True, text=True)
    assert done.returncode == 2 and "consumer-groups" in done.stderr
    # The other tools are there by their Kafka names too (the offset checker of ZooKeeper
    # groups is tested in tests/cluster/test_zk_consumer.py); bad arguments: exit code 2.
    done = subprocess.run(
        [sys.executable, "-m", "broker.tools", "consumer-offset-checker"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--zookeeper" in done.stderr


def test_the_console_script(broker, empty_group):
    """pyproject.toml declares `kafka-consumer-groups`, Kafka's name; installed (uv sync),
    it is the same command and names itself so in its usage."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    module, _, name = scripts["kafka-consumer-groups"].partition(":")
    assert getattr(importlib.import_module(module), name) is main
    script = Path(sys.executable).parent / "kafka-consumer-groups"
    assert script.exists(), "the project is not installed with its scripts: uv sync"
    done = subprocess.run(
        [script, "--bootstrap-server", broker.bootstrap, "--list", "--state", "Empty"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and empty_group[0] in done.stdout.split()
    done = subprocess.run([script, "--list"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("usage: kafka-consumer-groups ")
