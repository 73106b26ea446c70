-- What both health checks begin with: hack/gen-install puts this file before each of
-- them in argocd-cm.yaml (an Argo CD health check is one script). Lua's base library
-- only: a health check from argocd-cm runs without the others
-- (resource.customizations.useOpenLibs is off).

-- the status condition of this type, or nil
local function condition(kind)
  local status = obj.status or {}
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

-- "Reason: message"
local function say(c)
  local text = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

-- Progressing until `who` has reported on this generation of the spec, else nil
local function unobserved(who)
  local generation = obj.metadata.generation
  if generation ~= nil and (obj.status or {}).observedGeneration ~= generation then
    return {
      status = "Progressing",
      message = "waiting for " .. who .. " to act on generation " .. tostring(generation)
        .. " of the spec",
    }
  end
  return nil
end
