"""The purgatory on its own: watch, complete on event, expire on deadline, exactly once."""

from __future__ import annotations

from broker.util.purgatory import DelayedOperation, OperationFailed, Purgatory


class Waiting(DelayedOperation):
    """Completes when `ready` is set; answers "expired" at its deadline."""

    def __init__(self, deadline_ms, keys, ready=False, explode=False):
        super().__init__(deadline_ms, keys)
        self.ready, self.explode, self.checks = ready, explode, 0

    def try_complete(self, now_ms):
        self.checks += 1
        if self.explode:
            raise RuntimeError("boom")
        return self.ready and self.complete(f"done@{now_ms}")

    def on_expiration(self, now_ms):
        return f"expired@{now_ms}"


def test_completes_at_once_when_it_can():
    p = Purgatory("t")
    op = Waiting(100, ["a"], ready=True)
    assert p.try_complete_else_watch(op, 0)
    assert op.result == "done@0" and len(p) == 0 and p.watched_keys() == 0


def test_event_on_a_key_completes_and_other_keys_forget_it():
    p = Purgatory("t")
    op = Waiting(100, ["a", "b"])
    results = []
    op.add_done_callback(results.append)
    assert not p.try_complete_else_watch(op, 0)
    assert p.check_and_complete("a", 10) == 0  # checked, not ready
    op.ready = True
    assert p.check_and_complete("c", 11) == 0  # nobody watches c
    assert p.check_and_complete("b", 12) == 1
    assert results == ["done@12"]
    assert p.check_and_complete("a", 13) == 0 and op.checks == 3  # not checked again
    assert p.next_deadline() is None and len(p) == 0 and p.watched_keys() == 0
    assert p.expire_due(1000) == 0 and results == ["done@12"]  # exactly once


def test_deadlines_expire_in_order_and_tell_the_timer_when_they_move_earlier():
    p = Purgatory("t")
    earlier = []
    p.on_earlier_deadline = earlier.append
    late, soon = Waiting(300, ["a"]), Waiting(100, ["a"])
    p.try_complete_else_watch(late, 0)
    p.try_complete_else_watch(soon, 0)
    p.try_complete_else_watch(Waiting(200, ["b"]), 0)
    assert earlier == [300, 100] and p.next_deadline() == 100
    assert p.expire_due(99) == 0
    assert p.expire_due(200) == 2 and soon.result == "expired@200"
    assert p.next_deadline() == 300 and len(p) == 1
    assert p.expire_due(300) == 1 and late.result == "expired@300"
    assert p.watched_keys() == 0


def test_a_deadline_already_past_expires_at_once():
    p = Purgatory("t")
    op = Waiting(5, ["a"])
    assert p.try_complete_else_watch(op, 10)
    assert op.result == "expired@10" and len(p) == 0


def test_a_failing_check_completes_the_operation_as_failed():
    p = Purgatory("t")
    op = Waiting(100, ["a"])
    p.try_complete_else_watch(op, 0)
    op.explode = True
    assert p.check_and_complete("a", 1) == 1
    assert isinstance(op.result, OperationFailed) and str(op.result.error) == "boom"


def test_callbacks_added_after_completion_run_at_once():
    op = Waiting(100, ["a"], ready=True)
    op.try_complete(0)
    got = []
    op.add_done_callback(got.append)
    assert got == ["done@0"] and not op.complete("again")


class Keyed(Waiting):
    """Remembers which keys' events it heard of (as DelayedFetch looks at one partition)."""

    def __init__(self, deadline_ms, keys):
        super().__init__(deadline_ms, keys)
        self.heard = []

    def on_key(self, key):
        self.heard.append(key)


def test_an_event_tells_the_operation_its_key():
    p = Purgatory("t")
    op = Keyed(100, ["a", "b"])
    p.try_complete_else_watch(op, 0)
    p.check_and_complete("b", 1)
    p.check_and_complete("a", 2)
    assert op.heard == ["b", "a"] and op.checks == 3  # the first check heard of no key


def test_completion_leaves_other_keys_lists_until_a_purge():
    p = Purgatory("t", purge_interval=3)
    ops = [Waiting(100, [f"k{i}" for i in range(50)]) for _ in range(3)]
    for op in ops:
        p.try_complete_else_watch(op, 0)
    assert len(p) == 3
    ops[0].ready = True
    assert p.check_and_complete("k0", 1) == 1
    # Completing did not walk the other 49 keys' lists: they still hold it, uncounted.
    assert len(p) == 2 and sum(ops[0] in w for w in p._watchers.values()) == 49
    ops[1].complete("by its owner")  # completed outside the purgatory: counted too
    assert len(p) == 1
    ops[2].ready = True
    assert p.check_and_complete("k7", 2) == 1  # the third completion purges every list
    assert len(p) == 0 and p._watchers == {} and p._deadlines == []
