"""bootc-operator: roll bootc OS images out to Kubernetes nodes safely.

Subpackages: ``api`` (wire models, helpers, CRD generation), ``informers``
(informer/workqueue library), ``reconcilers`` (controller logic), ``daemon``
(node agent). ``cli`` is the single entry point for both modes.
"""

__version__ = "0.1.0"
