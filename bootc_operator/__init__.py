"""bootc-operator: roll bootc OS images out to Kubernetes nodes safely.

Subpackages: ``api`` (wire models, helpers, CRD generation), ``informers``
(watch caches, client-go ``tools/cache``), ``workqueue`` (queues and workers,
client-go ``util/workqueue``), ``reconcilers`` (controller loops and watchers), ``gates``
(the Prometheus gates), ``policy`` (pure decisions), ``controller`` (the wiring),
``daemon`` (node agent), ``kubectl`` (the plugin). ``cli`` is the single entry point for both modes.
"""

__version__ = "0.1.0"
