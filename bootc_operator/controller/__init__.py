"""``bootc-operator controller``: one asyncio runtime wiring informers, queues and reconcilers.

- ``core``: ``Controller``, the parts of one process: shared informers (pools,
  BootcNodes, Nodes), the reconcilers and their rate-limited queues (one
  ``Loop`` each), drains, the Event recorder; leader-only work and shutdown;
- ``routing``: which queues an informer event or a reconciler's news wakes;
- ``lifecycle``: ``run(args)``: clients, caches, leader election, the end of
  leadership.
"""

from bootc_operator.controller.core import Controller
from bootc_operator.controller.lifecycle import run

__all__ = ["Controller", "run"]
