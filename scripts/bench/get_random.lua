-- GET /users/profile/{random id in 1..max_id}.  usage: wrk -s get_random.lua URL -- [max_id]
local max_id = 10000
local token = os.getenv("BENCH_TOKEN")
function init(args)
  if args[1] then max_id = tonumber(args[1]) end
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
end
function request()
  local headers = {}
  if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end
  return wrk.format("GET", "/users/profile/" .. math.random(1, max_id), headers)
end
