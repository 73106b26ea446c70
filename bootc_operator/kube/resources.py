"""Resource descriptors: how to address a kind on the API server.

A :class:`Resource` is (group, version, plural, namespaced[, kind]); ``path()``
builds the REST path for a collection, an object or a subresource, for core
kinds (``/api/v1/...``) and API groups (``/apis/<group>/<version>/...``) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from bootc_operator.api import constants as c


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource, e.g. ``Resource("", "v1", "nodes", namespaced=False)``."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str = ""

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``<group>/<version>`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """REST path of the collection (``name=None``) or of one object.

        For a namespaced resource without ``namespace`` the collection path
        spans all namespaces; an object of a namespaced kind needs a namespace.
        """
        if subresource and not name:
            raise ValueError("a subresource needs an object name")
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts += ["namespaces", quote(namespace, safe="")]
        elif self.namespaced and name:
            raise ValueError(f"{self} is namespaced: {name!r} needs a namespace")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)

    def __str__(self) -> str:
        """``nodes`` or ``bootcnodepools.node.bootc.dev`` (kubectl's spelling)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


NODES: Final = Resource("", "v1", "nodes", namespaced=False, kind="Node")
PODS: Final = Resource("", "v1", "pods", namespaced=True, kind="Pod")
SECRETS: Final = Resource("", "v1", "secrets", namespaced=True, kind="Secret")
EVENTS: Final = Resource("events.k8s.io", "v1", "events", namespaced=True, kind="Event")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", namespaced=True, kind="Lease")
POD_DISRUPTION_BUDGETS: Final = Resource(
    "policy", "v1", "poddisruptionbudgets", namespaced=True, kind="PodDisruptionBudget"
)
BOOTC_NODE_POOLS: Final = Resource(
    c.GROUP, c.VERSION, c.POOL_PLURAL, namespaced=False, kind=c.POOL_KIND
)
BOOTC_NODES: Final = Resource(c.GROUP, c.VERSION, c.NODE_PLURAL, namespaced=False, kind=c.NODE_KIND)
VALIDATING_ADMISSION_POLICIES: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    namespaced=False,
    kind="ValidatingAdmissionPolicy",
)
VALIDATING_ADMISSION_POLICY_BINDINGS: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    namespaced=False,
    kind="ValidatingAdmissionPolicyBinding",
)
