"""Which of a model's backends takes the next request: the balancing policy, no I/O.

Every backend of a pool is a :class:`Member`: its configured weight, the
requests it has in flight, its round-robin credit, whether it is out (and
until when). Quality routing's factors multiply the weights. The
gateway keeps one per backend and asks :func:`pick`.

* Least outstanding requests, weighted: each member's weight divided by its
  requests in flight plus one (as Envoy's least-request balancer does), the
  requests shared out by those weights with smooth weighted round robin
  (nginx's): sequential traffic splits by weight within a request or so, a
  busy member gets fewer new requests, and a change of weight takes effect at
  once.
* Sticky (opt-in): a request with an affinity key goes to the member that
  wins a weighted rendezvous hash of the key, among those in service: the
  same conversation lands on the same server (its prompt cache), and when
  that one is out only its conversations move.
* A member that is out is never picked while another is in; when all are
  out, the one whose back-off ends first is tried (a gateway with every
  backend out still tries one rather than refusing everything).

Health is :func:`failed` and :func:`succeeded`: ``threshold`` failures in a
row take a member out for a back-off that doubles with each further failure
(up to ``longest``); a success brings it back at once. Times are seconds on
the wall clock (``time.time()``), so that gateway replicas can share them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import orjson


@dataclass(frozen=True)
class Backoff:
    """How failures take a member out: after ``threshold`` in a row, for
    ``first`` seconds, doubled with each further failure up to ``longest``."""

    threshold: int = 1
    first: float = 2.0
    longest: float = 60.0

    def period(self, failures: int) -> float:
        extra = max(0, failures - self.threshold)
        return min(self.longest, self.first * 2.0 ** min(extra, 32))


@dataclass
class Member:
    """The balancer's view of one backend of a pool."""

    name: str
    weight: float = 1.0
    outstanding: int = 0
    # Smooth weighted round robin's credit: every pick adds each member's weight
    # and takes the total from the one chosen, which is the one owed the most.
    credit: float = 0.0
    # Failures in a row (a success resets it), and until when the member is out.
    failures: int = 0
    out_until: float = 0.0

    def is_out(self, now: float) -> bool:
        return self.out_until > now


def pick(
    members: Sequence[Member],
    now: float,
    affinity: str | None = None,
    factors: Sequence[float] | None = None,
) -> int:
    """The index of the member that takes the next request (``members`` not
    empty); ``factors`` multiply the weights (quality routing's, in (0, 1]).
    Records the choice in the members' credits."""
    weights = [m.weight * (factors[i] if factors else 1.0) for i, m in enumerate(members)]
    candidates = [i for i, m in enumerate(members) if not m.is_out(now)]
    if not candidates:
        return min(range(len(members)), key=lambda i: members[i].out_until)
    if affinity is not None:
        return max(candidates, key=lambda i: _rendezvous(affinity, members[i].name, weights[i]))
    # The weights as the load leaves them: a member with requests in flight gets
    # its share of the new ones divided by their count plus one.
    loaded = {i: weights[i] / (members[i].outstanding + 1) for i in candidates}
    total = sum(loaded.values())
    for i in candidates:
        members[i].credit += loaded[i]
    chosen = max(candidates, key=lambda i: (members[i].credit, -i))
    members[chosen].credit -= total
    for i in candidates:
        # Bounded: a member passed over while busy is owed a little, not a burst.
        members[i].credit = max(-total, min(total, members[i].credit))
    return chosen


def _rendezvous(key: str, name: str, weight: float) -> float:
    """Weighted rendezvous score: the highest wins; a member's share of keys is
    its weight's share of the total."""
    digest = hashlib.blake2b(f"{key}\0{name}".encode(), digest_size=8).digest()
    # A uniform number in (0, 1), never 0 or 1 (the logarithm needs both out).
    uniform = (int.from_bytes(digest, "big") + 0.5) / 2.0**64
    return -weight / math.log(uniform)


def failed(member: Member, now: float, backoff: Backoff) -> bool:
    """Count a failure; True when it takes the member out (it was in)."""
    member.failures += 1
    if member.failures < backoff.threshold:
        return False
    was_in = not member.is_out(now)
    member.out_until = now + backoff.period(member.failures)
    return was_in


def succeeded(member: Member) -> bool:
    """Count a success; True when the member had failures or was out."""
    changed = member.failures > 0 or member.out_until > 0.0
    member.failures = 0
    member.out_until = 0.0
    return changed


def affinity_of_messages(messages: Sequence[object], count: int = 2) -> str:
    """A conversation's affinity key: a digest of its first ``count`` messages,
    which stay the same as the conversation grows (the system prompt and the
    first user message, typically)."""
    head = orjson.dumps(list(messages[:count]), option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(head, digest_size=16).hexdigest()
