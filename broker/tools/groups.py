"""What the consumer-groups tool does with the brokers: `GroupTool` (the admin client and
the logs' offsets one command uses) and the short actions, list, delete and delete
offsets. Describe and reset have modules of their own (group_describe.py,
offset_reset.py)."""

from __future__ import annotations

from broker.client.admin import CONSUMER_PROTOCOL_TYPE, AdminClient, GroupListing
from broker.client.security import SecurityConfig
from broker.client.simple_consumer import SimpleConsumer
from broker.protocol.errors import ErrorCode, KafkaError
from broker.tools.arguments import TopicSpec
from broker.tools.output import Output

CLIENT_ID = "kafka-consumer-groups"
# Kafka's names of the classic group states, in its order.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
STATES_BY_KEY = {s.lower(): s for s in GROUP_STATES}


class GroupTool:
    """The connections and output one command uses: our AdminClient for the groups, a
    SimpleConsumer (made when first needed) for the logs' offsets."""

    def __init__(
        self,
        bootstrap: str,
        timeout_ms: int,
        out: Output,
        security: SecurityConfig | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout_ms = timeout_ms
        self.out = out
        self.security = security
        self.admin = AdminClient(
            bootstrap, client_id=CLIENT_ID, request_timeout_ms=timeout_ms, security=security
        )
        self._consumer: SimpleConsumer | None = None

    def close(self) -> None:
        self.admin.close()
        if self._consumer is not None:
            self._consumer.close()

    def __enter__(self) -> GroupTool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def consumer(self) -> SimpleConsumer:
        if self._consumer is None:
            self._consumer = SimpleConsumer(
                self.bootstrap,
                client_id=CLIENT_ID,
                timeout_s=self.timeout_ms / 1000,
                security=self.security,
            )
        return self._consumer

    def consumer_group_ids(self, states: list[str] | None = None) -> list[str]:
        return [g.group_id for g in self.consumer_groups(states)]

    def consumer_groups(self, states: list[str] | None = None) -> list[GroupListing]:
        """Groups of consumers, and groups that only commit offsets (protocol type ""), as
        Kafka's admin client lists consumer groups."""
        return [
            g
            for g in self.admin.list_groups(states)
            if g.protocol_type in (CONSUMER_PROTOCOL_TYPE, "")
        ]

    def partitions(
        self, specs: list[TopicSpec]
    ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """The partitions `specs` name that exist, and those that do not ((topic, -1) for
        a topic that does not exist), each sorted."""
        found: set[tuple[str, int]] = set()
        missing: set[tuple[str, int]] = set()
        for spec in specs:
            try:
                existing = self.admin.cluster.partitions_for(spec.topic)
            except KafkaError:
                missing.add((spec.topic, -1))
                continue
            for p in spec.partitions or existing:
                (found if p in existing else missing).add((spec.topic, p))
        return sorted(found), sorted(missing)

    def log_end_offsets(self, partitions) -> dict[tuple[str, int], int | None]:
        """The high watermark of each partition; None where it cannot be had (the topic
        was deleted, no leader within the timeout)."""
        out: dict[tuple[str, int], int | None] = {}
        for topic, partition in partitions:
            try:
                out[(topic, partition)] = self.consumer.latest_offset(topic, partition)
            except KafkaError:
                out[(topic, partition)] = None
        return out


# -- list, delete, delete offsets ----------------------------------------------------------


def list_groups(tool: GroupTool, state: str | None) -> None:
    """Group ids one a line; with --state a GROUP STATE table (only STATES if given)."""
    if state is None:
        for group_id in tool.consumer_group_ids():
            tool.out.line(group_id)
        return
    states = [STATES_BY_KEY[s.strip().lower()] for s in state.split(",")] if state else None
    listings = tool.consumer_groups(states)
    tool.out.table(("GROUP", "STATE"), [(g.group_id, g.state) for g in listings], (15,))


def delete_groups(tool: GroupTool, groups: list[str]) -> None:
    outcome = tool.admin.delete_groups(groups)
    done = [g for g, code in outcome.items() if code == ErrorCode.NONE]
    failed = {g: code for g, code in outcome.items() if code != ErrorCode.NONE}
    quoted = ", ".join(f"'{g}'" for g in done)
    if not failed:
        tool.out.line(f"Deletion of requested consumer groups ({quoted}) was successful.")
        return
    tool.out.error("Deletion of some consumer groups failed:")
    for group_id, code in failed.items():
        tool.out.line(f"* Group '{group_id}' could not be deleted due to: {_describe_code(code)}")
    if done:
        tool.out.line(f"\nThese other groups were deleted successfully: {quoted}")


def delete_offsets(tool: GroupTool, group_id: str, specs: list[TopicSpec]) -> None:
    """Kafka's --delete-offsets: the broker's answer per partition; a topic that does not
    exist is reported as Kafka's tool does, partition "Not Provided"."""
    partitions, missing = tool.partitions(specs)
    statuses = dict.fromkeys(missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if partitions:
        try:
            statuses.update(tool.admin.delete_group_offsets(group_id, partitions))
        except KafkaError as exc:
            tool.out.error(
                _GROUP_OFFSET_DELETE_ERRORS.get(
                    exc.code, "Encounter some unknown error: {exc}"
                ).format(g=group_id, exc=exc)
            )
            return
    topics = ", ".join(s.topic for s in specs)
    if any(code != ErrorCode.NONE for code in statuses.values()):
        tool.out.error("Encounter some partition level error, see the follow-up details:")
    else:
        tool.out.line(f"Request succeed for deleting offsets with topic {topics} group {group_id}")
    rows = [
        (
            t,
            p if p >= 0 else "Not Provided",
            "Successful" if code == ErrorCode.NONE else f"Error: {code.message}",
        )
        for (t, p), code in sorted(statuses.items())
    ]
    tool.out.table(("TOPIC", "PARTITION", "STATUS"), rows, (30, 15))


_GROUP_OFFSET_DELETE_ERRORS = {
    ErrorCode.INVALID_GROUP_ID: "'{g}' is not valid.",
    ErrorCode.GROUP_ID_NOT_FOUND: "'{g}' does not exist.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Access to '{g}' is not authorized.",
    ErrorCode.NON_EMPTY_GROUP: "Deleting offsets of a consumer group '{g}' is forbidden if the group is not empty.",
}


def _describe_code(code: ErrorCode) -> str:
    return f"{code.name}: {code.message}"
