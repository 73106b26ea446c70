"""The controller's reconcile loops: each runs on its own rate-limited queue.

Keyed by pool name: ``membership`` (BootcNodes, Node labels, finalizer), ``rollout``
(reboot slots, cordon, drain, Booted, the health gate), ``status`` (the pool's status,
gauges, Events), ``tags`` (tag -> digest), ``signatures`` (cosign verification).
Keyed by Node name: ``placement`` (the daemon's placement label). The seventh pool
loop, the Prometheus gates', lives with the gates (:mod:`bootc_operator.gates.alertgate`)
and the eighth, the Secret watches', is the controller's
(:meth:`bootc_operator.controller.core.Controller.reconcile_secret_watches`).
"""
