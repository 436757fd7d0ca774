"""The registry under faults: a leader paused (SIGSTOP, not killed) past its group session
is a zombie when it wakes up; the fencing token (schemas/registry/fencing.py) keeps
whatever it tries to append from counting, so no id is ever given twice."""

from __future__ import annotations

import os
import re
import signal
import threading

import httpx
import pytest

from tests.faults import campaign, checkers, workloads
from tests.faults.history import History
from tests.helpers.cluster import wait_for

pytestmark = pytest.mark.slow


def test_a_resumed_old_leader_cannot_hand_out_an_id(fault_cluster, tmp_path):
    instances = campaign.start_registries(fault_cluster, tmp_path, count=2)
    history = History()
    try:
        old = instances[workloads.registry_leader(instances)]
        new = next(r for r in instances if r is not old)
        http = httpx.Client(timeout=30)
        http.put(f"{old.url}/config", json={"compatibility": "NONE"})

        def register(instance, subject, name):
            answer = http.post(
                f"{instance.url}/subjects/{subject}/versions",
                json={"schema": workloads.schema_text(name)},
            )
            if answer.status_code == 200:
                history.ok("register", instance.url, (subject, name, answer.json()["id"]))
            return answer

        assert register(old, "z", "First").status_code == 200
        os.kill(old.proc.pid, signal.SIGSTOP)
        try:
            wait_for(
                lambda: re.findall(r"leader: (\S+)", new.log_text())[-1] == new.url,
                "the other instance elected",
            )
            assert register(new, "z", "Second").status_code == 200
            # The zombie's request waits in its socket; it runs the moment it resumes,
            # racing its own heartbeat thread that would tell it it lost the group.
            zombie: list[httpx.Response] = []
            sender = threading.Thread(target=lambda: zombie.append(register(old, "z", "Third")))
            sender.start()
        finally:
            os.kill(old.proc.pid, signal.SIGCONT)
        sender.join(60)
        (answer,) = zombie
        body = answer.json()
        # Refused as a write of a fenced or no longer leading instance, or forwarded.
        assert answer.status_code == 200 or body["error_code"] in (50003, 50004), body
        workloads.registry_leader(instances)
        views = {r.url: workloads.registry_view(r.url) for r in instances}
        assert checkers.registry_anomalies(history, views) == []
        ids = sorted(i for i, _ in views[new.url].values())
        assert len(ids) == len(set(ids)) and ids[:2] == [1, 2], views
    finally:
        for r in instances:
            r.stop()
