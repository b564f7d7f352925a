-- GET/PUT mix.  usage: wrk -s mixed.lua URL -- <put_fraction 0..1> [max_id] [assume_v1]
-- Thread t of n touches only ids with id % n == t and tracks their versions from 200 answers,
-- so PUTs carry the right version (overlapping PUTs of one id come back 409: counted as non-2xx).
-- BENCH_TOKEN, when set, is sent as a bearer token (an admin token: any id may be written).
local threads, counter = {}, 0
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
  for _, t in ipairs(threads) do t:set("nthreads", #threads) end
end

local put_frac, max_id, assume_v1, known, seq = 0.1, 10000, false, {}, 0
local token = os.getenv("BENCH_TOKEN")
function init(args)
  put_frac = tonumber(args[1] or "0.1")
  max_id = tonumber(args[2] or "10000")
  assume_v1 = args[3] == "assume_v1"
  math.randomseed(os.time() * 1000 + tid)
end

local function pick()
  local n = nthreads or 1
  while true do
    local id = math.random(1, max_id)
    if id % n == tid then return id end
  end
end

function request()
  local id = pick()
  local v = known[id] or (assume_v1 and 1 or nil)
  local headers = {}
  if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end
  if v and math.random() < put_frac then
    seq = seq + 1
    headers["Content-Type"] = "application/json"
    local body = '{"display_name":"wrk-' .. tid .. '-' .. seq .. '","version":' .. v .. '}'
    return wrk.format("PUT", "/users/profile/" .. id, headers, body)
  end
  return wrk.format("GET", "/users/profile/" .. id, headers)
end

function response(status, headers, body)
  if status == 200 then
    local id = tonumber(body:match('"id":(%d+)'))
    local v = tonumber(body:match('"version":(%d+)'))
    if id and v and (known[id] == nil or v > known[id]) then known[id] = v end
  end
end
