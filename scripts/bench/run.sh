#!/usr/bin/env bash
# Benchmarks the door on this machine: GetTask throughput (wrk on loopback, bounded in time)
# and an idle capsule's resident memory. Results go in BENCHMARKS.md by hand, with the machine.
# Usage: scripts/bench/run.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
conns=${2:-64}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet
export MURMUR_HOME=$(mktemp -d)
out=$(mktemp)
./target/release/mur run --manifest manifests/worker-queue.yaml >"$out" 2>&1 &
sup=$!
trap 'kill -TERM $sup 2>/dev/null; wait $sup 2>/dev/null; rm -rf "$MURMUR_HOME" "$out"' EXIT
for _ in $(seq 100); do grep -q '^session:' "$out" && break; sleep 0.05; done
port=$(sed -n 's/^murmur: url localhost://p' "$out")
capsule=$(python3 -c "import json,glob,sys; print(json.load(open(glob.glob(sys.argv[1]+'/run/*.json')[0]))['pid'])" "$MURMUR_HOME")
echo "idle capsule RSS: $(awk '/VmRSS/{print $2, $3}' /proc/$capsule/status)"
task=$(curl -s -X POST "http://127.0.0.1:$port/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
  -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"bench"}]}}}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])')
echo "GetTask on a completed task, $conns connections, 2 wrk threads, ${secs}s:"
TASK_ID=$task wrk -t2 -c"$conns" -d"${secs}s" -s scripts/bench/gettask.lua "http://127.0.0.1:$port/" | grep -E 'requests/s|latency|errors'
echo "capsule RSS after load: $(awk '/VmRSS/{print $2, $3}' /proc/$capsule/status)"
