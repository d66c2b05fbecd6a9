-- wrk script: POST / GetTask for one task id (TASK_ID in the environment), A2A-Version 1.0;
-- with TRACEPARENT set, each request carries it (a poller inside a trace, which the door spans).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
local traceparent = os.getenv("TRACEPARENT")
if traceparent and traceparent ~= "" then
  wrk.headers["traceparent"] = traceparent
end
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"' .. os.getenv("TASK_ID") .. '"}}'

done = function(summary, latency, requests)
  io.write(string.format("requests/s: %.0f\n", summary.requests / (summary.duration / 1e6)))
  io.write(string.format("latency p50: %.2f ms  p99: %.2f ms\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000))
  io.write(string.format("errors: %d\n", summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
end
