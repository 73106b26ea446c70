"""The scale and performance benchmark behind ``hack/bench`` / ``make bench`` (issue 9).

- :mod:`hack.perf.cli`: the command, the table and the JSON;
- :mod:`hack.perf.scale`: figures 1-4 for one N (membership, rollout, reaction, cost)
  and the stage-ahead comparison;
- :mod:`hack.perf.daemons`: figure 5 (real daemon processes);
- :mod:`hack.perf.simfleet`: the simulated fleet (a child process);
- :mod:`hack.perf.nodes`: kubelet-like Nodes and the bounded-concurrency runner (shared
  with ``hack/bench-informer``);
- :mod:`hack.perf.observer`, :mod:`hack.perf.analysis`: timestamped watch events and
  the figures computed from them;
- :mod:`hack.perf.components`, :mod:`hack.perf.procinfo`: processes, /proc, metrics;
- :mod:`hack.perf.kubectl_startup`: ``kubectl bootc``'s start-up time (its own command).
"""
