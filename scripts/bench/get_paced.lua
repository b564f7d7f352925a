-- GET /users/profile/{random id in 1..max_id}, each connection waiting DELAY_MS (integer,
-- wrk's timer) between its requests: a load at a chosen rate below the peak, for latency.
-- usage: BENCH_DELAY_MS=5 wrk -s get_paced.lua URL -- [max_id]
local max_id = 10000
local token = os.getenv("BENCH_TOKEN")
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
function init(args)
  if args[1] then max_id = tonumber(args[1]) end
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
end
function delay()
  return pause
end
function request()
  local headers = {}
  if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end
  return wrk.format("GET", "/users/profile/" .. math.random(1, max_id), headers)
end
