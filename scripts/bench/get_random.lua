-- GET /users/profile/{random id in min_id..max_id, every step-th}.
-- usage: wrk -s get_random.lua URL -- [max_id] [min_id] [step]
local max_id, min_id, step = 10000, 1, 1
local token = os.getenv("BENCH_TOKEN")
function init(args)
  if args[1] then max_id = tonumber(args[1]) end
  if args[2] then min_id = tonumber(args[2]) end
  if args[3] then step = tonumber(args[3]) end
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
end
function request()
  local headers = {}
  if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end
  return wrk.format("GET", "/users/profile/" .. string.format("%d", min_id + step * math.random(0, math.floor((max_id - min_id) / step))), headers)
end
