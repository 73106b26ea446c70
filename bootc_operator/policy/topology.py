"""Zone by zone: a pool's failure domains (``spec.rollout.topology``) and which one
may be disrupted now.

A member's *domain* is the value of the topology label on its Node. Members
without the label (or with an empty value) form one domain of their own,
``NO_DOMAIN``, always last. Domains go in the stated order
(``spec.rollout.topology.order``), then the others by name, then ``NO_DOMAIN``.

Reboot slots stay inside one domain, the *current* one, until it is done:

- while members hold slots, the current domain is the first (in domain order)
  of the holders' domains (more than one only when the topology was set
  mid-rollout: those holders finish, no new slot goes outside the current one);
- else it is the first domain with a member still on its way to the target
  (pending, staging, staged or rebooting). Degraded members and members held
  back after a failed health check do not keep their domain open: the pool
  reports them already, and without a topology the rollout passes them by too;
- while canaries are pending, only their domains count, so the canaries still
  go first (one domain at a time, too).

maxUnavailable applies inside the current domain (no other domain has slots);
``maxUnavailablePerDomain`` (an integer, or a percentage of the domain's members)
caps the slots inside it further.
Staging (stageAhead) may run ahead across domains, in domain order
(``plan_staging`` uses ``rank``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from bootc_operator.api.intstr import resolve_max_unavailable
from bootc_operator.policy.nodestate import NodeState, NodeView

NO_DOMAIN = ""
#: how the status shows ``NO_DOMAIN`` (never a label value: parentheses are not allowed)
UNLABELLED = "(unlabelled)"

_ON_THE_WAY = frozenset(
    {NodeState.PENDING, NodeState.STAGING, NodeState.STAGED, NodeState.REBOOTING}
)


@dataclass(frozen=True, slots=True)
class Topology:
    """``spec.rollout.topology`` as the decisions read it."""

    key: str
    order: tuple[str, ...] = ()
    max_unavailable: int | str | None = None  # maxUnavailablePerDomain; None: no own budget

    def budget(self, size: int) -> int | None:
        """The current domain's own budget for a domain of ``size`` members (None: none)."""
        if self.max_unavailable is None:
            return None
        return resolve_max_unavailable(self.max_unavailable, size)

    def domain(self, v: NodeView) -> str:
        """Member ``v``'s domain (``NO_DOMAIN`` without the label)."""
        return v.label(self.key) or NO_DOMAIN

    def rank(self, domain: str) -> tuple[int, int, str]:
        """Sort key of ``domain``: listed ones as listed, then by name, unlabelled last."""
        if domain == NO_DOMAIN:
            return (2, 0, "")
        if domain in self.order:
            return (0, self.order.index(domain), domain)
        return (1, 0, domain)

    def ordered(self, domains: Iterable[str]) -> tuple[str, ...]:
        """``domains`` once each, in domain order."""
        return tuple(sorted(set(domains), key=self.rank))


def display(domain: str) -> str:
    """How status shows a domain."""
    return UNLABELLED if domain == NO_DOMAIN else domain


def on_its_way(v: NodeView) -> bool:
    """Whether member ``v`` keeps its domain from being done, besides holding a slot
    (module doc); a holder released in this very plan no longer does, nor does a
    member an autoscaler is removing (``departing``: it never takes a slot)."""
    return not v.held_back and not v.departing and v.state in _ON_THE_WAY


def current_domain(
    topology: Topology,
    members: Iterable[NodeView],
    holders: Collection[str],
    only: Collection[str] | None = None,
) -> str | None:
    """The domain whose members may take slots now; None: every domain is done.

    ``holders``: members that keep their slot in this plan; ``only``: when given,
    only these members open a domain (the pending canaries).
    """
    members = list(members)
    held = [topology.domain(v) for v in members if v.name in holders]
    if held:
        return min(held, key=topology.rank)
    open_domains = [
        topology.domain(v) for v in members if on_its_way(v) and (only is None or v.name in only)
    ]
    return min(open_domains, key=topology.rank) if open_domains else None


def domain_news(topology: Topology, members: Iterable[NodeView], current: str | None) -> str:
    """The progress note: which domain is being updated, of how many ("" when done)."""
    if current is None:
        return ""
    domains = topology.ordered(topology.domain(v) for v in members)
    place = f"{domains.index(current) + 1} of {len(domains)}"
    if current == NO_DOMAIN:
        return f"updating the nodes without label {topology.key}, last ({place})"
    return f"updating {topology.key}={current} ({place})"
