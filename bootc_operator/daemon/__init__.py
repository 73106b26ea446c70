"""The node agent (``bootc-operator daemon``): drives bootc on its host from its BootcNode.

Modules:

- ``agent``: the asyncio runtime (informer on its own BootcNode, workqueue, reconcile,
  switch task, poll, shutdown) and ``run(args)``, the ``daemon`` mode's entry point;
- ``decide``: the state machine, a pure function of (spec, host status, work in flight);
- ``status_report``: the BootcNode.status the daemon writes: built from a decision,
  diffed and patched;
- ``bootc_status``: parsing ``bootc status`` JSON into BootcNode.status fields;
- ``assessment``: the current boot's assessment (boot-complete.target) from systemctl's
  answers, as ``status.bootAssessment``, and when to read it again;
- ``hostcmd``: host commands (bootc status, the switch unit, bootc rollback, systemctl)
  with timeouts;
- ``hostwatch``: pyinotify on the event loop, for deployment changes on the host;
- ``authfile``: the pool's pull secret as the host's ``/run/ostree/auth.json``;
- ``metrics``: the daemon's Prometheus metrics.
"""
