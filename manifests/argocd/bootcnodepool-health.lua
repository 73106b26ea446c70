-- Argo CD health of a BootcNodePool (node.bootc.dev/v1alpha1), from its status alone.
-- Reads the Go-compatible conditions (UpToDate, Degraded), so it also works for pools
-- run by the Go bootc-operator. Uses only Lua's base library: a health check from
-- argocd-cm runs without the others (resource.customizations.useOpenLibs is off).
--   Progressing  the rollout is under way, or the operator has not yet acted on this
--                generation of the spec (so a sync never looks done too early)
--   Healthy      every node runs the target (UpToDate=True)
--   Degraded     Degraded=True: halted, a failed health check, an invalid spec, a
--                refused signature, a degraded node... (the reason and message)
--   Suspended    the rollout waits for a person: spec.rollout.paused, or canaries
--                passed and spec.rollout.approvedDigest does not name the target yet
local hs = {}

local function condition(conditions, kind)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function say(c)
  local text = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

local status = obj.status or {}
local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "waiting for the bootc-operator to act on generation " .. tostring(generation)
    .. " of the spec"
  return hs
end

local uptodate = condition(status.conditions, "UpToDate")
local degraded = condition(status.conditions, "Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = say(degraded)
  return hs
end
if uptodate == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the bootc-operator to report the rollout"
  return hs
end
if uptodate.status == "True" then
  hs.status = "Healthy"
  hs.message = say(uptodate)
  return hs
end
if uptodate.reason == "Paused" or uptodate.reason == "AwaitingApproval" then
  hs.status = "Suspended"
  hs.message = say(uptodate)
  return hs
end
hs.status = "Progressing"
hs.message = say(uptodate)
return hs
