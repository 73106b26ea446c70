"""The controller's reconcilers: the loops that read caches and write.

Reconcilers (async; each runs on its own rate-limited queue keyed by pool name,
through :func:`bootc_operator.workqueue.run_workers`, which also keeps the
``controller_runtime_reconcile_*`` metrics): ``membership``, ``rollout``,
``status``, ``tags``, ``placement``, ``alertgate``; ``drain`` runs the drains rollout
starts, ``healthpods`` watches the health gate's pods, ``pullsecrets`` watches the
Secrets pools reference.

They read only informer caches and write through narrow patches, both through
the gateway ``context`` (reads shadowed by
:class:`bootc_operator.informers.Overlay`, read-your-writes); ``fanout`` bounds
the per-node writes of one pass; ``metrics`` holds the pool gauges.

Their decisions are pure functions in :mod:`bootc_operator.policy`; ``triggers``
(which queues an informer event concerns) stays here, beside the wiring it serves.
The pure parts of the I/O modules sit at their top: ``pullsecrets.evaluate_secret``,
``tags.retry_delay``.
"""
