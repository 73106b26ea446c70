"""Process plumbing shared by the controller and the daemon.

``process`` (the shape of a running mode: stop signals, the probe/metrics
server, waiting for a task or the stop), ``httpserver`` (/healthz, /readyz,
/metrics), ``leaderelection`` (Lease-based leader election, controller only),
``events`` (Event recorder with de-duplication, written for kubectl describe;
controller only).
"""
