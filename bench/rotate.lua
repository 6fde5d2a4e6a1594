-- bench/rotate.lua — the wrk script of bench/rotate: POST /v1/tickets/rotate,
-- each request presenting a live ticket and each answer's successor
-- presented next, as agents refreshing their tickets do.
--
--   OG_BENCH_API_KEY=KEY OG_BENCH_OUT=FILE \
--       wrk -t T -c C -d Ds -s bench/rotate.lua URL -- rotate PREFIX FIRST
--
--   PREFIX  ticket files PREFIX.<n>, one live ticket a line; the wrk thread
--           number i (0-based, in setup order) takes PREFIX.<FIRST + i>
--   OG_BENCH_OUT  done() writes the figures there in bench/http.lua's
--           format, which bench/lib.sh's merge_wrk reads (expected 200).
--
-- A thread keeps its live tickets in a queue: a request takes one, a 200
-- puts its successor back (any other answer loses it). A thread needs at
-- least as many tickets as connections; one that runs out stops, sending
-- GET /bench/tokens-exhausted once (404, counted as spill).

local threads = {}
local counter = 0

function setup(thread)
   thread:set("tidx", counter)
   counter = counter + 1
   table.insert(threads, thread)
end

local live = {}       -- the thread's live tickets (a queue)
local head, tail = 1, 0
local headers
local verified = false
issued = 0
exhausted = 0
spill_sent = 0
wrapped = 0
st = {}

local function push(t)
   tail = tail + 1
   live[tail] = t
end

local function pop()
   if head > tail then
      return nil
   end
   local t = live[head]
   live[head] = nil
   head = head + 1
   return t
end

function init(args)
   local prefix, first = args[2], tonumber(args[3])
   local path = prefix .. "." .. (first + tidx)
   for line in io.lines(path) do
      push(line)
   end
   headers = {
      ["Authorization"] = "Bearer " .. (os.getenv("OG_BENCH_API_KEY") or ""),
      ["Content-Type"] = "application/json",
   }
end

local function build(t)
   return wrk.format("POST", "/v1/tickets/rotate", headers,
                     '{"ticket":"' .. t .. '"}')
end

function request()
   local t = pop()
   if not verified and tidx == 0 then
      -- wrk calls request() once on thread 0 before it starts, to check
      -- the request parses; that one is never sent: its ticket stays.
      verified = true
      if t then
         head = head - 1
         live[head] = t
         return build(t)
      end
   end
   if not t then
      exhausted = 1
      spill_sent = spill_sent + 1
      wrk.thread:stop()
      return wrk.format("GET", "/bench/tokens-exhausted")
   end
   issued = issued + 1
   return build(t)
end

function response(status, hdrs, body)
   st[status] = (st[status] or 0) + 1
   if status == 200 then
      local t = body:match('"ticket"%s*:%s*"([^"]+)"')
      if t then
         push(t)
      end
   end
end

function done(summary, latency, requests)
   local out = assert(io.open(os.getenv("OG_BENCH_OUT") or "/dev/stderr", "w"))
   local e = summary.errors
   local issued_t, spill_t, exhausted_t = 0, 0, 0
   local status = {}
   for _, t in ipairs(threads) do
      issued_t = issued_t + (t:get("issued") or 0)
      spill_t = spill_t + (t:get("spill_sent") or 0)
      exhausted_t = exhausted_t + (t:get("exhausted") or 0)
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
   out:write("wrapped 0\n")
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
