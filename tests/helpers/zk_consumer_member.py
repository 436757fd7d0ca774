"""A member of a ZooKeeper consumer group as a process of its own, for tests that kill one.

    python -m tests.helpers.zk_consumer_member ZK_CONNECT GROUP TOPIC CONSUMER_ID LOG [key=value ...]

Consumes until SIGTERM (then closes: commit, release, leave, exit 0). Every record it
processes is a line `partition offset` in LOG, written before the next poll() (which is
what lets the consumer commit it), so after a kill -9 LOG holds what the member processed
and the offsets in ZooKeeper never pass it. `read_log` reads it back.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from broker.client.zk_consumer import ZkConsumer


def read_log(path: Path) -> list[tuple[int, int]]:
    """(partition, offset) of each processed record, a torn last line left out."""
    if not path.exists():
        return []
    lines = path.read_text().split("\n")[:-1]  # the part after the last newline is torn
    return [(int(p), int(o)) for p, o in (line.split() for line in lines)]


def main(argv: list[str]) -> int:
    connect, group, topic, consumer_id, log_path, *settings = argv
    config = dict(s.split("=", 1) for s in settings)
    config.update({"zookeeper.connect": connect, "group.id": group, "consumer.id": consumer_id})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = ZkConsumer([topic], config)
    with open(log_path, "a", buffering=1) as log:
        while not stop.is_set():
            records = consumer.poll(200)
            if records:
                log.write("".join(f"{r.partition} {r.offset}\n" for r in records))
                log.flush()
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
