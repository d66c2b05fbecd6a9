-- wrk script: alternates SendMessage (returnImmediately) and GetTask, A2A-Version 1.0. Each
-- GetTask reads the task the thread's last send created (TASK_ID until the first answer):
-- a capsule retains 10,000 tasks, so a fixed id would be dropped within the run and GetTask
-- would measure "Task not found" answers. JSON-RPC error answers are counted and printed.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
local send = '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"bench"}]},"configuration":{"returnImmediately":true}}}'
local last = os.getenv("TASK_ID")
local n = 0
rpc_errors = 0
local threads = {}

setup = function(thread)
  table.insert(threads, thread)
end

request = function()
  n = n + 1
  if n % 2 == 0 then
    return wrk.format(nil, nil, nil, send)
  end
  return wrk.format(nil, nil, nil, '{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"' .. last .. '"}}')
end

response = function(status, headers, body)
  local id = body:match('"task":%s*{%s*"id":%s*"([^"]+)"')
  if id then
    last = id
  end
  if body:find('"error":', 1, true) then
    rpc_errors = rpc_errors + 1
  end
end

done = function(summary, latency, requests)
  local errors = 0
  for _, t in ipairs(threads) do
    errors = errors + t:get("rpc_errors")
  end
  io.write(string.format("requests/s: %.0f\n", summary.requests / (summary.duration / 1e6)))
  io.write(string.format("latency p50: %.2f ms  p99: %.2f ms\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000))
  io.write(string.format("errors: %d\n", summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
  io.write(string.format("rpc errors: %d\n", errors))
end
