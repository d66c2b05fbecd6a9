-- wrk script: POST / SendMessage with configuration.returnImmediately, A2A-Version 1.0.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"bench"}]},"configuration":{"returnImmediately":true}}}'

done = function(summary, latency, requests)
  io.write(string.format("requests/s: %.0f\n", summary.requests / (summary.duration / 1e6)))
  io.write(string.format("latency p50: %.2f ms  p99: %.2f ms\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000))
  io.write(string.format("errors: %d\n", summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
end
