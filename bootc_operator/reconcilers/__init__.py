"""The controller's reconcilers: the loops that read caches and write, and what they share.

- ``loops/``: the reconcile loops (``membership``, ``rollout``, ``status``, ``tags``,
  ``signatures``, ``placement``), each on its own rate-limited queue, run through
  :func:`bootc_operator.workqueue.run_workers` (which also keeps the
  ``controller_runtime_reconcile_*`` metrics);
- ``watchers/``: the tasks the loops start and read (``drain``, ``healthpods``,
  ``pullsecrets``);
- what they share: ``context`` (the ``Context``: ``cache`` reads from the informers'
  stores shadowed by :class:`bootc_operator.informers.Overlay`, read-your-writes;
  ``writes``, the narrow API writes; the pools' policies and locks), ``knowledge``
  (what the loops learned of each pool: tag resolutions, verified digests, gate
  states; one writer per part), ``fanout`` (bounds the per-node writes of one pass),
  ``metrics`` (the pool gauges), ``triggers`` (which queues an informer event
  concerns, pure).

The Prometheus gates (alerts, preconditions, health queries) are one room of their
own: :mod:`bootc_operator.gates`. The decisions are pure functions in
:mod:`bootc_operator.policy`. The pure parts of the I/O modules sit at their top:
``watchers.pullsecrets.evaluate_secret``, ``loops.tags.retry_delay``.
"""
