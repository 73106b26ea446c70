"""The node agent (``bootc-operator daemon``): drives bootc on its host from its BootcNode.

Modules:

- ``agent``: the asyncio runtime (informer on its own BootcNode, workqueue, reconcile,
  switch task, poll, shutdown) and ``run(args)``, the ``daemon`` mode's entry point;
- ``decide``: the state machine, a pure function of (spec, host status, work in flight);
- ``nodestatus``: BootcNode.status built from a decision, diffed and patched;
- ``bootc_status``: parsing ``bootc status`` JSON into BootcNode.status fields;
- ``hostcmd``: host commands (bootc status, the switch unit, systemctl) with timeouts;
- ``hostwatch``: pyinotify on the event loop, for deployment changes on the host;
- ``pullsecret``: the pull secret as ``/run/ostree/auth.json`` on the host;
- ``metrics``: the daemon's Prometheus metrics.
"""
