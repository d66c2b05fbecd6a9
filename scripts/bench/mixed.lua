-- wrk script: alternates SendMessage (returnImmediately) and GetTask for TASK_ID, A2A-Version 1.0.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
local send = '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"bench"}]},"configuration":{"returnImmediately":true}}}'
local get = '{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"' .. os.getenv("TASK_ID") .. '"}}'
local n = 0

request = function()
  n = n + 1
  if n % 2 == 0 then
    return wrk.format(nil, nil, nil, send)
  end
  return wrk.format(nil, nil, nil, get)
end

done = function(summary, latency, requests)
  io.write(string.format("requests/s: %.0f\n", summary.requests / (summary.duration / 1e6)))
  io.write(string.format("latency p50: %.2f ms  p99: %.2f ms\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000))
  io.write(string.format("errors: %d\n", summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
end
