-- Argo CD health of a BootcNode (node.bootc.dev/v1alpha1): the node daemon's own work,
-- from its status alone (the Go-compatible Idle and Degraded conditions). Argo CD shows
-- it on the pool's BootcNodes in the resource tree. Base library only (see the pool's).
--   Progressing  the daemon stages the desired image, reboots into it, or has not
--                reported on this generation of the spec yet
--   Healthy      it runs the desired image (Idle), or has it staged while the spec
--                asks for no more (desiredImageState Staged: the rollout decides
--                when it reboots)
--   Degraded     Degraded=True: bootc failed, the host cannot be managed, a reboot
--                was not permitted... (the reason and message)
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
  hs.message = "waiting for the node's daemon to act on generation " .. tostring(generation)
    .. " of the spec"
  return hs
end

local idle = condition(status.conditions, "Idle")
local degraded = condition(status.conditions, "Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = say(degraded)
  return hs
end
if idle == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the node's daemon to report"
  return hs
end
local want = (obj.spec or {}).desiredImageState
if idle.status == "True" or (idle.reason == "Staged" and want ~= "Booted") then
  hs.status = "Healthy"
  hs.message = say(idle)
  return hs
end
hs.status = "Progressing"
hs.message = say(idle)
return hs
