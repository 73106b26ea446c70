"""Process plumbing shared by the controller (and partly the daemon).

``leaderelection`` (Lease-based leader election), ``events`` (events.k8s.io/v1
recorder with de-duplication), ``httpserver`` (/healthz, /readyz, /metrics).
"""
