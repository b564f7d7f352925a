-- get_random.lua with each connection waiting BENCH_DELAY_MS (integer, wrk's timer) between its
-- requests: a load at a chosen rate below the peak, for latency. Run from the repository root.
-- usage: BENCH_DELAY_MS=5 wrk -s scripts/bench/get_paced.lua URL -- [max_id]
dofile("scripts/bench/get_random.lua")
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
function delay()
  return pause
end
