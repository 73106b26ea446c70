-- Argo CD health of a BootcNodePool (node.bootc.dev/v1alpha1), from its status alone
-- (after common.lua). Reads the Go-compatible conditions (UpToDate, Degraded), so it
-- also works for pools run by the Go bootc-operator.
--   Progressing  the rollout is under way, or the operator has not yet acted on this
--                generation of the spec (so a sync never looks done too early)
--   Healthy      every node runs the target (UpToDate=True)
--   Degraded     Degraded=True: halted, a failed health check, an invalid spec, a
--                refused signature, a degraded node... (the reason and message)
--   Suspended    the rollout waits for a person: spec.rollout.paused, or canaries
--                passed and spec.rollout.approvedDigest does not name the target yet
local hs = unobserved("the bootc-operator")
if hs ~= nil then
  return hs
end
hs = {}
local uptodate = condition("UpToDate")
local degraded = condition("Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = say(degraded)
elseif uptodate == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the bootc-operator to report the rollout"
elseif uptodate.status == "True" then
  hs.status = "Healthy"
  hs.message = say(uptodate)
elseif uptodate.reason == "Paused" or uptodate.reason == "AwaitingApproval" then
  hs.status = "Suspended"
  hs.message = say(uptodate)
else
  hs.status = "Progressing"
  hs.message = say(uptodate)
end
return hs
