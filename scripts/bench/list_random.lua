-- GET /users/profiles?ids=<n random distinct ids in 1..max_id>.
-- usage: wrk -s list_random.lua URL -- [max_id] [n]
local max_id, n = 10000, 100
local token = os.getenv("BENCH_TOKEN")
function init(args)
  if args[1] then max_id = tonumber(args[1]) end
  if args[2] then n = tonumber(args[2]) end
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
end
function request()
  local seen, ids = {}, {}
  while #ids < n do
    local id = math.random(1, max_id)
    if not seen[id] then seen[id] = true; ids[#ids + 1] = id end
  end
  local headers = {}
  if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end
  return wrk.format("GET", "/users/profiles?ids=" .. table.concat(ids, ","), headers)
end
