"""The controller's reconcilers and their pure decisions.

Reconcilers (async; each runs on its own rate-limited queue keyed by pool name,
through :func:`bootc_operator.workqueue.run_workers`, which also keeps the
``controller_runtime_reconcile_*`` metrics): ``membership``, ``rollout``,
``status``, ``tags``; ``drain`` runs the drains rollout starts, ``pullsecrets``
watches the Secrets pools reference.

They read only informer caches and write through narrow patches, both through
the gateway ``context`` (reads shadowed by
:class:`bootc_operator.informers.Overlay`, read-your-writes); ``fanout`` bounds
the per-node writes of one pass; ``metrics`` holds the pool gauges.

Pure modules (no I/O; exhaustively unit-tested):

- ``selectors``: label selectors, validated and matched;
- ``poolspec``: a pool's spec validated, the digest it targets;
- ``windows``: maintenance windows, open now and next opening;
- ``ownership``: a BootcNode's pool, the shape of the BootcNodes a pool owns;
- ``membership_plan``: which pool owns which Node (conflicts resolved);
- ``triggers``: which queues an informer event concerns;
- ``nodestate``: one member's row of the state table (``NodeView``);
- ``slots``: reboot-slot planning and the slot protocol (take, release, uncordon);
- ``drainplan``: which pods a drain evicts, how its outcome reads;
- ``poolstatus``: pool status aggregation (counts, conditions, phase).

The pure parts of the I/O modules sit at their top: ``pullsecrets.evaluate_secret``,
``tags.retry_delay``.
"""
