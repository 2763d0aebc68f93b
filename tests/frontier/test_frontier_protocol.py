"""The encoders and decoders of the frontier's Lua scripts, on the replies' edge cases (the
scripts themselves run on a real Redis in tests/frontier/test_frontier.py and friends)."""

from __future__ import annotations

from frontier.admission import AdmitCall, AdmitReply
from frontier.counters import Outcome
from frontier.leases import AcquireReply, ReapReply, encode_complete
from frontier.partitions import DueReply, decode_claim, owner_value
from frontier.records import Completion, Entry, Lease


def test_acquire_reply_fenced_idle_and_leases() -> None:
    assert AcquireReply.decode(3, [-2]) == (True, None, [])
    assert AcquireReply.decode(3, [-1]) == (False, None, [])
    reply = AcquireReply.decode(3, [b"12.5", b"7", b"a.test", b"1.2.0 http://a.test/", b"-4"])
    assert not reply.fenced and reply.next_due == 12.5
    assert reply.leases == [Lease(3, "7", "a.test", Entry("http://a.test/", 1, 2, 0), -4.0)]


def test_reap_and_claim_replies() -> None:
    assert ReapReply.decode(-2) == (True, 0)
    assert ReapReply.decode(5) == (False, 5)
    assert decode_claim(0) is None and decode_claim(b"9") == 9
    assert owner_value(b"w1|9") == "w1" and owner_value(None) is None


def test_admit_reply_and_call() -> None:
    raw = [2, 1, b"101", 0, 0, 1, 0, b"-1", 3, 0]
    assert AdmitReply.decode(raw) == (2, 1, "101", 0, 0, 1, 0, None, (3, 0))
    assert AdmitReply.decode([0, 0, b"", 0, 0, 0, 0, b"4.5"]).woke == 4.5
    short = AdmitCall("p:", 1.0, "l", 0, 0, [], ["lua", 0], [("h", "0 u", b"x" * 14)], True)
    assert short.encode() == ["p:", 1.0, "l", 0, 0, 3, 0, "lua", 0, "h", "0 u", b"x" * 14]
    full = AdmitCall("p:", 1.0, "a", 5, 2, [7], ["lua", 0], [("h", "0 u", b"", "2.0", 1)], False)
    assert full.encode()[5:8] == [5, 1, 7] and full.encode()[-5:] == ["h", "0 u", b"", "2.0", 1]


def test_complete_encoding_and_due_reply() -> None:
    lease = Lease(0, "4", "a.test", Entry("http://a.test/"), -1.5)
    argv = encode_complete("p:", "z", [Completion(lease, 9.0, Outcome.FETCHED),
                                       Completion(lease, 9.0, Outcome.DEFERRED,
                                                  requeue=lease.entry, at_head=True)])
    assert argv[:2] == ["p:", "z"] and len(argv) == 2 + 2 * 9
    assert argv[2:11] == ["4", "a.test", "9.0", Outcome.FETCHED, "", "t", "-1.5", "", ""]
    assert argv[15:20] == ["0 http://a.test/", "h", "-1.5", "", ""]
    revisit = Lease(0, "5", "a.test", Entry("http://a.test/", 2, 1, 0, revisit=True))
    tracked = encode_complete("p:", "l", [Completion(revisit, 9.0, Outcome.REVISITED,
                                                     revisit_at=12.5)])
    # the schedule keeps the plain entry: promotion marks it a revisit again
    assert tracked[-2:] == ["12.5", "2 http://a.test/"]


def test_revisit_entries_round_trip() -> None:
    e = Entry("http://a.test/x y", 3, 1, 2, revisit=True)
    assert e.encode() == "3.1.2.r http://a.test/x y" and Entry.decode(e.encode()) == e
    assert Entry.decode("3.0.0.r u").revisit and not Entry.decode("3.0.0 u").revisit
    assert not Entry.decode("3 u").revisit
    assert DueReply.decode([[b"1", b"5"], b"-1"]) == ({1, 5}, None)
    assert DueReply.decode([[], b"3.25"]) == (set(), 3.25)
