-- Argo CD health of a BootcNode (node.bootc.dev/v1alpha1): the node daemon's own work,
-- from its status alone (after common.lua; the Go-compatible Idle and Degraded
-- conditions). Argo CD shows it on the pool's BootcNodes in the resource tree.
--   Progressing  the daemon stages the desired image, reboots into it, or has not
--                reported on this generation of the spec yet
--   Healthy      it runs the desired image (Idle), or has it staged while the spec
--                asks for no more (desiredImageState Staged: the rollout decides
--                when it reboots)
--   Degraded     Degraded=True: bootc failed, the host cannot be managed, a reboot
--                was not permitted... (the reason and message)
local hs = unobserved("the node's daemon")
if hs ~= nil then
  return hs
end
hs = {}
local idle = condition("Idle")
local degraded = condition("Degraded")
local want = (obj.spec or {}).desiredImageState
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = say(degraded)
elseif idle == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the node's daemon to report"
elseif idle.status == "True" or (idle.reason == "Staged" and want ~= "Booted") then
  hs.status = "Healthy"
  hs.message = say(idle)
else
  hs.status = "Progressing"
  hs.message = say(idle)
end
return hs
