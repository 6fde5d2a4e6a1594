-- bench/credits.lua — the wrk script of bench/execute's provider floor:
-- POST /v1/credits straight to an oncegate-sandbox, a fresh
-- Idempotency-Key per request, so every request creates a credit (201).
--
--   OG_BENCH_OUT=FILE wrk -t T -c C -d Ds -s bench/credits.lua URL -- MODE PREFIX FIRST
--
--   MODE    ignored (bench/lib.sh's run_wrk passes one)
--   PREFIX  the keys' prefix, unique per run: wrk thread i (0-based, in
--           setup order) sends the keys PREFIX-<FIRST + i>-1, -2, ...
--   body    {account, amount, currency, reference, expires_at} as
--           docs/sandbox.md says: account A-<n>, amount "1.00", USD,
--           reference = the key, expires_at an hour after the thread started
--
-- setup(), response() and done() are bench/http.lua's, loaded first, so
-- OG_BENCH_OUT gets the same figures (status counts, "issued", the latency
-- histogram) and bench/lib.sh's merge_wrk reads them alike.

dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "http.lua")

local prefix, n, headers, expires
local verified = false

function init(args)
   prefix = args[2] .. "-" .. (tonumber(args[3]) + tidx)
   n = 0
   expires = os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() + 3600)
   headers = {["Content-Type"] = "application/json"}
end

function request()
   n = n + 1
   local key = prefix .. "-" .. n
   headers["Idempotency-Key"] = key
   -- wrk builds one request on thread 0 to check it and never sends it.
   if verified or tidx ~= 0 then
      issued = issued + 1
   end
   verified = true
   return wrk.format("POST", "/v1/credits", headers,
                     '{"account":"A-' .. n .. '","amount":"1.00","currency":"USD",' ..
                     '"reference":"' .. key .. '","expires_at":"' .. expires .. '"}')
end
