-- bench/rotate.lua — the wrk script of bench/rotate: POST /v1/tickets/rotate,
-- each request presenting a live ticket and each answer's successor
-- presented next, as agents refreshing their tickets do.
--
--   OG_BENCH_API_KEY=KEY OG_BENCH_OUT=FILE \
--       wrk -t T -c C -d Ds -s bench/rotate.lua URL -- rotate PREFIX FIRST
--
--   PREFIX  ticket files PREFIX.<n>, one live ticket a line; the wrk thread
--           number i (0-based, in setup order) takes PREFIX.<FIRST + i>
--   OG_BENCH_OUT  done() (bench/wrk_common.lua) writes the figures there,
--           which bench/lib.sh's merge_wrk reads (expected 200).
--
-- A thread keeps its live tickets in a queue: a request takes one, a 200
-- puts its successor back (any other answer loses it). A thread needs at
-- least as many tickets as connections; one that runs out stops, sending
-- GET /bench/tokens-exhausted once (404, counted as spill).

-- bench/wrk_common.lua, beside this script: setup(), done(), and a
-- request's sending (or a thread's stop) and an answer's counting.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
               .. "?.lua;" .. package.path
local common = require("wrk_common")
setup, done = common.setup, common.done

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
   return common.send(t, build)
end

function response(status, hdrs, body)
   common.count(status)
   if status == 200 then
      local t = body:match('"ticket"%s*:%s*"([^"]+)"')
      if t then
         push(t)
      end
   end
end
