"""The controller's pure decisions: no I/O, no clock of their own, exhaustively unit-tested
(``unit/policy/``). The reconcilers (``bootc_operator.reconcilers``) read caches, call
these, and write what they decide; ``kubectl bootc`` explains with the same code.

- ``selectors``: label selectors, validated and matched;
- ``poolspec``: a pool's spec read once into its ``PoolPolicy`` (validated, the digest it
  targets, the budgets for its size);
- ``windows``: maintenance windows, open now and next opening;
- ``health``: the post-reboot health gate's verdicts;
- ``ownership``: a BootcNode's pool, the shape of the BootcNodes a pool owns;
- ``membership_plan``: which pool owns which Node (conflicts resolved);
- ``placement_plan``: which Nodes carry the daemon's placement label;
- ``nodestate``: one member's row of the state table (``NodeView``);
- ``slots``: reboot-slot planning and the slot protocol (take, release, uncordon);
- ``autoscaler``: living alongside cluster autoscalers (annotations a slot holder
  carries and their restoration; nodes an autoscaler is removing);
- ``drainplan``: which pods a drain evicts, how its outcome reads;
- ``poolstatus``: pool status aggregation (counts, conditions, phase);
- ``nodescope``: whether the daemons' node-scope admission policy is enforced, without
  which a sealed pull secret isolates nothing.
"""
