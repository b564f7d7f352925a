-- PATCH of a random profile without If-Match (JSON Merge Patch).
-- usage: wrk -s patch.lua URL -- [max_id] [field]
-- Sets `field` (default bio) to a new 160-character value each time; a patch never conflicts.
-- BENCH_TOKEN, when set, is sent as a bearer token (an admin token: any id may be written).
local max_id, field, seq = 10000, "bio", 0
local token = os.getenv("BENCH_TOKEN")
local filler = string.rep("patched text, ", 12)
function init(args)
  max_id = tonumber(args[1] or "10000")
  field = args[2] or "bio"
  math.randomseed(os.time() * 1000 + math.random(1, 1000))
end

function request()
  seq = seq + 1
  local id = math.random(1, max_id)
  local headers = { ["Content-Type"] = "application/merge-patch+json" }
  if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end
  local value = string.sub(seq .. " " .. filler, 1, 160)
  return wrk.format("PATCH", "/users/profile/" .. id, headers, '{"' .. field .. '":"' .. value .. '"}')
end
