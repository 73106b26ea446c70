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

Pure modules (exhaustively unit-tested): ``selectors``, ``ownership``,
``membership_plan``, ``triggers``, ``nodestate``, ``slots``, ``drainplan``,
``poolspec``, ``poolstatus``.
"""
