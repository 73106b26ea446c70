"""Watchers: per-object tasks the loops start and read, which wake them on a change.

``drain`` (one task per draining node, evictions through policy/v1), ``healthpods``
(Pod watches of nodes under the health gate's ``pods`` check), ``pullsecrets`` (one
informer per Secret a pool references: pull secrets and cosign key Secrets),
``nodescope`` (the daemons' node-scope admission policy: may pull secrets be sealed). Each
calls back (``on_change``) rather than enqueueing itself; the controller routes it.
"""
