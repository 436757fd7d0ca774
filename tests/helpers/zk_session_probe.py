"""A ZooKeeper session in a process of its own, for the partition tests, which run it in a
network namespace: it owns one ephemeral znode and prints each session state (CONNECTED,
SUSPENDED, LOST) on a line of its own, then CREATED once the znode exists, until its stdin
closes.

    python zk_session_probe.py HOSTS PATH SESSION_TIMEOUT_S
"""

from __future__ import annotations

import sys

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry


def main(hosts: str, path: str, session_timeout_s: str) -> None:
    client = KazooClient(
        hosts=hosts,
        timeout=float(session_timeout_s),
        # Retry often: the test heals the network and waits for the reconnection, which
        # kazoo's default backoff (up to a minute) would make slow to see.
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=1, max_delay=0.5),
    )
    client.add_listener(lambda state: print(state, flush=True))
    client.start(timeout=30)
    client.create(path, ephemeral=True, makepath=True)
    print("CREATED", flush=True)
    sys.stdin.read()
    client.stop()
    client.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
