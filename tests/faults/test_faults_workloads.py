"""Quick variants of the campaign's newer workloads (fixed seed, one fault): the
transactional consume-transform-produce copier (tests/faults/workloads.py,
`Transactional`) while the broker coordinating its transactions is SIGKILLed and
restarted; the checker (`checkers.transaction_anomalies`) finds every acknowledged input
value in the output read read_committed exactly once, in order, and nothing of an aborted
transaction (the copier aborts one in ten on purpose). The soak with every nemesis is `python -m bench.bench_faults --workloads
transactions` (docs/faults.md)."""

from __future__ import annotations

import pytest

from tests.faults import campaign
from tests.faults.nemesis import NEMESES

pytestmark = [pytest.mark.slow, pytest.mark.clients]


def test_transactions_copy_exactly_once_through_a_coordinator_kill(fault_cluster):
    result = campaign.run_transactions(
        fault_cluster, NEMESES["kill-txn-coordinator"], 61, fault_s=2.0, rate=100.0
    )
    faults = [(op.type, op.f, op.value) for op in result.history.faults()]
    assert result.faults == 1, faults
    assert result.history.of("txn", "ok") and result.history.of("send", "ok")
    # Aborted output reached the log (the copier aborts some on purpose): the checker saw
    # none of it read_committed.
    assert result.history.of("txn", "fail")
    assert result.anomalies == [], f"{[str(a) for a in result.anomalies[:10]]}; {faults}"
    assert not [n for n in result.notes if n.startswith("not settled")], result.notes
