-- bench/wrk_common.lua — what the wrk scripts bench/http.lua and
-- bench/rotate.lua share: numbering the threads, the stop of a thread that
-- has run out of lines, counting requests and answers, and done()'s
-- figures, which bench/lib.sh's merge_wrk reads. A script loads it beside
-- itself:
--
--   package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
--                  .. "?.lua;" .. package.path
--   local common = require("wrk_common")
--   setup, done = common.setup, common.done
--
-- The scripts keep their per-thread counters in globals (issued,
-- spill_sent, exhausted, wrapped, st), which done() reads from each thread
-- with thread:get.

local M = {}

local threads = {}
local counter = 0

-- wrk's setup(): thread i (0-based, in setup order) gets tidx i.
function M.setup(thread)
   thread:set("tidx", counter)
   counter = counter + 1
   table.insert(threads, thread)
end

-- A thread out of lines stops rather than present one twice: the request
-- it still must send is GET /bench/tokens-exhausted (404 route_not_found,
-- no store call), counted as spill, and it reports exhausted=1.
function M.spill()
   exhausted = 1
   spill_sent = spill_sent + 1
   wrk.thread:stop()
   return wrk.format("GET", "/bench/tokens-exhausted")
end

-- The request for line, built by build(line); nil: the thread is out of
-- lines (M.spill()).
function M.send(line, build)
   if not line then
      return M.spill()
   end
   issued = issued + 1
   return build(line)
end

-- Counts an answer's status (st: status -> count).
function M.count(status)
   st[status] = (st[status] or 0) + 1
end

-- wrk's done() (in wrk's main Lua state): "key value" lines and the
-- latency histogram ("lat VALUE_US COUNT") to OG_BENCH_OUT.
function M.done(summary, latency, requests)
   local out = assert(io.open(os.getenv("OG_BENCH_OUT") or "/dev/stderr", "w"))
   local e = summary.errors
   local issued_t, spill_t, exhausted_t, wrapped_t = 0, 0, 0, 0
   local status = {}
   for _, t in ipairs(threads) do
      issued_t = issued_t + (t:get("issued") or 0)
      spill_t = spill_t + (t:get("spill_sent") or 0)
      exhausted_t = exhausted_t + (t:get("exhausted") or 0)
      wrapped_t = wrapped_t + (t:get("wrapped") or 0)
      out:write(string.format("thread_issued %d %d\n", t:get("tidx"),
                              t:get("issued") or 0))
      for code, n in pairs(t:get("st") or {}) do
         status[code] = (status[code] or 0) + n
      end
   end
   out:write(string.format("duration_us %d\n", summary.duration))
   out:write(string.format("requests %d\n", summary.requests))
   out:write(string.format("issued %d\n", issued_t))
   out:write(string.format("spill_sent %d\n", spill_t))
   out:write(string.format("exhausted_threads %d\n", exhausted_t))
   out:write(string.format("wrapped %d\n", wrapped_t))
   out:write(string.format("err_connect %d\nerr_read %d\nerr_write %d\nerr_timeout %d\n",
                           e.connect, e.read, e.write, e.timeout))
   for code, n in pairs(status) do
      out:write(string.format("status %d %d\n", code, n))
   end
   for i = 1, #latency do
      local v, n = latency(i)
      out:write(string.format("lat %d %d\n", v, n))
   end
   out:close()
end

return M
