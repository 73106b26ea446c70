"""The node agent (``bootc-operator daemon``): drives bootc on its host from its BootcNode.

Modules: ``bootc_status`` (parsing ``bootc status`` JSON into BootcNode.status fields).
"""
