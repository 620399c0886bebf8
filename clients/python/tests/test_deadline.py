"""The deadline rule: held from the start of the last acknowledged call
until start + ttl; loss is final, signalled by a timer and by every check."""

import asyncio
import time

from fencing._deadline import Deadline


def test_deadline_counts_from_the_start_of_the_call():
    state = Deadline(10)
    start = time.monotonic() - 3          # a call sent 3 s ago, answered now
    assert state.acknowledge(start)
    assert abs(state.deadline - (start + 10)) < 1e-9
    assert 6.5 < state.remaining() < 7.1
    assert not state.lost.is_set()


def test_an_older_acknowledgement_does_not_move_the_deadline_back():
    state = Deadline(10)
    now = time.monotonic()
    state.acknowledge(now)
    state.acknowledge(now - 5)
    assert abs(state.deadline - (now + 10)) < 1e-9


def test_timer_signals_the_loss_at_the_deadline():
    lost = []
    state = Deadline(0.2, on_lost=lambda: lost.append(True))
    state.acknowledge(time.monotonic())
    assert state.lost.wait(2)
    assert lost == [True] and "deadline" in state.reason


def test_a_late_acknowledgement_is_a_loss():
    state = Deadline(1)
    assert not state.acknowledge(time.monotonic() - 2)   # acknowledged after its deadline
    assert state.lost.is_set()


def test_loss_is_final():
    state = Deadline(10)
    state.acknowledge(time.monotonic())
    state.lose("a renewal was refused")
    assert not state.acknowledge(time.monotonic())
    assert state.expired() and state.reason == "a renewal was refused"


def test_a_check_reads_the_clock_before_the_timer_fires(monkeypatch):
    state = Deadline(5)
    state.acknowledge(time.monotonic())
    real = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: real() + 6)   # as after a freeze
    assert state.expired() and state.lost.is_set()


def test_asyncio_event_and_loop_timer():
    async def main():
        loop = asyncio.get_running_loop()
        state = Deadline(0.1, event=asyncio.Event(), schedule=loop.call_later)
        state.acknowledge(time.monotonic())
        await asyncio.wait_for(state.lost.wait(), 2)
        return state.reason
    assert "deadline" in asyncio.run(main())


def test_an_answer_after_the_deadline_does_not_revive_the_lease(monkeypatch):
    # A renewal sent before the deadline whose answer is read after it (the
    # process froze meanwhile, and no check and no timer has run yet): the
    # lease is lost, as Go, Java and Node decide; start + ttl is not revived.
    state = Deadline(10, schedule=lambda delay, fn: None)   # the timer does not run
    t0 = time.monotonic()
    state.acknowledge(t0)                     # deadline t0 + 10
    real = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: real() + 11)   # thawed after the deadline
    assert not state.acknowledge(t0 + 4)      # renewal sent at t0 + 4, answered at t0 + 11
    assert state.lost.is_set()
    assert "deadline" in state.reason
