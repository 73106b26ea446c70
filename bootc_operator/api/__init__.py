"""The ``node.bootc.dev/v1alpha1`` API: wire models, their helpers and CRD generation.

Modules: ``constants`` (group, labels, annotations, reasons), ``defaults`` (every
default of the spec, read by the models and the runtime alike), ``v1alpha1``
(pydantic models), ``conditions`` (metav1.Condition semantics, the Node Ready
reader), ``timefmt`` (metav1.Time / MicroTime written and read), ``imageref``
(image reference parsing), ``intstr`` (maxUnavailable resolution), ``crdgen``
(CRD YAML from the models).
"""
