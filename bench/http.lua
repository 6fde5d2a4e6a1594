-- bench/http.lua — the wrk script of bench/http: POST /v1/operations with
-- pre-issued grants, one line of a token file per request.
--
--   OG_BENCH_API_KEY=KEY OG_BENCH_OUT=FILE \
--       wrk -t T -c C -d Ds -s bench/http.lua URL -- MODE PREFIX FIRST
--
--   MODE    admit   every line once: a fresh grant and a fresh operation id,
--                   expected 202 (outcome admitted)
--           replay  grants that were admitted, as NEW operations: expected
--                   409 grant_not_available. The lines carry new operation
--                   ids (og-bench-http-tokens --renew-ids); when a thread
--                   has presented all of its lines it starts over with ids
--                   it makes itself, so every request stays a replay
--   PREFIX  token files PREFIX.<n>, lines "OPERATION_UUID TOKEN ACCOUNT";
--           the wrk thread number i (0-based, in setup order) reads
--           PREFIX.<FIRST + i>, so two wrk processes get disjoint files
--   OG_BENCH_OUT  done() writes the figures there ("key value" lines and
--           the latency histogram, "lat VALUE_US COUNT"), which bench/http
--           sums over processes and reads percentiles from. (done() runs in
--           wrk's main Lua state, which never sees the script arguments.)
--
-- An admit thread that has used all of its lines stops (wrk.thread:stop())
-- rather than present a grant twice: it sends, at most once per
-- connection, GET /bench/tokens-exhausted (404 route_not_found, no store
-- call), which is counted as "spill", not as an error, and reports
-- exhausted=1, which bench/http prints as a warning beside the figure.
--
-- Lines are read one request at a time (no preloading), so every thread
-- starts sending at once.

-- bench/wrk_common.lua, beside this script: setup(), done(), and a
-- request's sending (or a thread's stop) and an answer's counting.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./")
               .. "?.lua;" .. package.path
local common = require("wrk_common")
setup, done = common.setup, common.done

-- Per-thread state (each wrk thread has its own Lua state).
local mode, path, file
local key
local peeked          -- a line read for wrk's verification call, not sent
local verified = false
local headers
local cycle = 0
issued = 0            -- requests sent with a line (globals: read in done())
exhausted = 0
spill_sent = 0
st = {}               -- status -> count
wrapped = 0           -- replay: times the thread started over

-- A version-4 UUID from math.random, 16 bits at a time (string.format's
-- %x is only safe below 2^31 in some Lua builds).
local function uuid4()
   local r = math.random
   return string.format("%04x%04x-%04x-4%03x-%04x-%04x%04x%04x",
                        r(0, 0xffff), r(0, 0xffff), r(0, 0xffff), r(0, 0xfff),
                        0x8000 + r(0, 0x3fff), r(0, 0xffff), r(0, 0xffff),
                        r(0, 0xffff))
end

function init(args)
   mode = args[1]
   local prefix, first = args[2], tonumber(args[3])
   path = prefix .. "." .. (first + tidx)
   file = assert(io.open(path, "r"))
   key = os.getenv("OG_BENCH_API_KEY") or ""
   headers = {
      ["Authorization"] = "Bearer " .. key,
      ["Content-Type"] = "application/json",
   }
   -- Distinct streams per thread and process for the replay's own ids
   -- (a collision would still be refused: the grant is spent either way).
   math.randomseed(os.time() * 1000 + (first + tidx) * 7919)
end

local function next_line()
   local line = file:read("*l")
   if line or mode ~= "replay" then
      return line
   end
   -- replay: start over; the ids in the file were used once already.
   file:close()
   file = assert(io.open(path, "r"))
   wrapped = wrapped + 1
   cycle = cycle + 1
   return file:read("*l")
end

local function build(line)
   local op, token, account = line:match("^(%S+) (%S+) (%S+)$")
   if not op then
      error("bench/http.lua: malformed line in " .. path)
   end
   if cycle > 0 then
      op = uuid4()
   end
   local body = '{"operation_id":"' .. op .. '","token":"' .. token ..
      '","params":{"account":"' .. account ..
      '","amount":"1.00","currency":"USD"}}'
   return wrk.format("POST", "/v1/operations", headers, body)
end

function request()
   local line
   if not verified and tidx == 0 then
      -- wrk calls request() once on thread 0 before it starts, to check
      -- the request parses; that one is never sent, so keep its line.
      verified = true
      peeked = next_line()
      line = peeked
      if line then
         return build(line)
      end
   elseif peeked then
      line, peeked = peeked, nil
   else
      line = next_line()
   end
   return common.send(line, build)
end

function response(status, hdrs, body)
   common.count(status)
end
