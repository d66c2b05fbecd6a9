-- wrk script: POST / SendMessage with configuration.returnImmediately, A2A-Version 1.0.
-- Each answer is read: a task the server took (any state but TASK_STATE_REJECTED) counts as
-- accepted, a TASK_STATE_REJECTED task ("busy": a correct answer, but no work done) as
-- rejected, a JSON-RPC error as an error. Reading every body costs wrk a Lua callback per
-- answer, for every server alike.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"bench"}]},"configuration":{"returnImmediately":true}}}'
-- WAIT=1: each request waits for its task's end (no returnImmediately): with as many
-- connections as the capsule has room for, every request is a task run to its end.
if os.getenv("WAIT") == "1" then
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"bench"}]}}}'
end

accepted = 0
rejected = 0
rpc_errors = 0
local threads = {}

setup = function(thread)
  table.insert(threads, thread)
end

response = function(status, headers, body)
  if body:find('"error":', 1, true) then
    rpc_errors = rpc_errors + 1
  elseif body:find('TASK_STATE_REJECTED', 1, true) then
    rejected = rejected + 1
  elseif body:find('"task":', 1, true) then
    accepted = accepted + 1
  end
end

done = function(summary, latency, requests)
  local took, gave, errors = 0, 0, 0
  for _, t in ipairs(threads) do
    took = took + t:get("accepted")
    gave = gave + t:get("rejected")
    errors = errors + t:get("rpc_errors")
  end
  local secs = summary.duration / 1e6
  io.write(string.format("requests/s: %.0f\n", summary.requests / secs))
  io.write(string.format("latency p50: %.2f ms  p99: %.2f ms\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000))
  io.write(string.format("errors: %d\n", summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
  io.write(string.format("rpc errors: %d\n", errors))
  io.write(string.format("accepted/s: %.1f\n", took / secs))
  io.write(string.format("rejected/s: %.1f\n", gave / secs))
end
