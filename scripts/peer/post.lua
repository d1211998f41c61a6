-- wrk script of the peer bench (scripts/bench-peer.sh): POSTs one GraphQL
-- request body, read from the file named after `--`, on every request, and
-- prints one machine-readable line at the end:
--   WRK|requests|seconds|p50 µs|p99 µs|socket errors|non-2xx
--   wrk -t1 -c16 -d10s -s post.lua http://127.0.0.1:PORT/graphql -- body.json
function init(args)
  local f = assert(io.open(args[1], "rb"))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json"
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK|%d|%.3f|%.1f|%.1f|%d|%d\n", summary.requests, summary.duration / 1e6,
    latency:percentile(50), latency:percentile(99), e.connect + e.read + e.write + e.timeout, e.status))
end
