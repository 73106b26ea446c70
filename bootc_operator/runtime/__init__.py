"""Process plumbing shared by the controller (and partly the daemon).

``leaderelection`` (Lease-based leader election), ``events`` (Event recorder
with de-duplication, written for kubectl describe), ``httpserver`` (/healthz,
/readyz, /metrics).
"""
