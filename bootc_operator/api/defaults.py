"""The API's defaults, in one place (pydantic-free).

Two kinds, both read from here by the models in ``v1alpha1`` (hence by the CRD's
``default:`` keys and descriptions, and by the reference ``hack/apidocs.py`` makes
from them) and by the runtime (``policy.poolspec.check_pool``, ``policy.windows``,
the signature loop), which ``kubectl bootc`` shares and which therefore cannot read
the pydantic models themselves:

- *CRD defaults*: the API server writes them into every object it admits; the
  runtime applies the same value where an object arrives without one (a CRD
  installed without our schema, a pool written before the field existed);
- *unset means*: no ``default:`` in the CRD (the object keeps the field absent, as
  the Go operator writes it), and the runtime's reading of the absent field.

``unit/api/test_defaults.py`` proves the CRD's defaults equal the models' and the
runtime's reading of an absent field equals them too.
"""

from __future__ import annotations

from typing import Final

# ------------------------------------------------------------------ CRD defaults

#: spec.rollout.maxUnavailable
MAX_UNAVAILABLE: Final = 1
#: spec.rollout.canary.nodes
CANARY_NODES: Final = 1
#: spec.rollout.order.by
ORDER_BY: Final = "Name"
#: spec.rollout.maintenanceWindows[].timeZone
WINDOW_TIME_ZONE: Final = "UTC"
#: spec.disruption.rebootPolicy
REBOOT_POLICY: Final = "RebootOnly"
#: spec.health.onFailure
HEALTH_ON_FAILURE: Final = "Halt"
#: spec.image.verification.publicKeySecretRefs[].key (what cosign generate-key-pair writes)
PUBLIC_KEY_SECRET_KEY: Final = "cosign.pub"

# ------------------------------------------------------------------ unset means

#: spec.rollout.maxUnhealthy
MAX_UNHEALTHY: Final = 2
#: spec.health.timeoutSeconds
HEALTH_TIMEOUT_SECONDS: Final = 600
