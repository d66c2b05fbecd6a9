#!/usr/bin/env bash
# What OpenTelemetry export costs the door (docs/telemetry.md): GetTask throughput of two idle
# capsules of the same build, one exporting every request's SERVER span to a local OTLP/HTTP
# sink (scripts/bench/otlp_sink.py, which answers without decoding) and one with export off,
# wrk against each in turn, ROUNDS times, in one run. Then what the sink took and what the
# exporting capsule dropped (its trace's spans_dropped records). Results go in BENCHMARKS.md.
# Usage: scripts/bench/telemetry.sh [SECONDS] [ROUNDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
rounds=${2:-3}
conns=${3:-64}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet
export MURMUR_HOME=$(mktemp -d)
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$MURMUR_HOME" "$work"' EXIT

python3 scripts/bench/otlp_sink.py >"$work/sink" &
pids+=($!)
sink=$!
for _ in $(seq 100); do grep -q '^listening' "$work/sink" && break; sleep 0.05; done
sink_port=$(awk '/^listening/{print $2}' "$work/sink")

# start NAME [ENV...]: a capsule of manifests/worker-queue.yaml; prints its port.
start() {
  local name=$1; shift
  env "$@" ./target/release/mur run --manifest manifests/worker-queue.yaml >"$work/$name" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do grep -q '^session:' "$work/$name" && break; sleep 0.05; done
  sed -n 's/^murmur: url localhost://p' "$work/$name"
}
off=$(start off OTEL_SDK_DISABLED=true)
on=$(start on OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sink_port")

task_on() {
  curl -s -X POST "http://127.0.0.1:$1/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"bench"}]}}}' \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])'
}
task_off=$(task_on "$off")
task_exp=$(task_on "$on")

rate() {
  TASK_ID=$2 wrk -t2 -c"$conns" -d"${secs}s" -s scripts/bench/gettask.lua "http://127.0.0.1:$1/" \
    | sed -n 's/^requests\/s: //p'
}
echo "GetTask, $conns connections, 2 wrk threads, ${secs}s a run, export off / on alternating:"
for r in $(seq "$rounds"); do
  a=$(rate "$off" "$task_off")
  b=$(rate "$on" "$task_exp")
  python3 -c "import sys; a,b=map(float,sys.argv[1:]); print(f'round $r: off {a:.0f}/s  on {b:.0f}/s  on/off {b/a:.3f}')" "$a" "$b"
done
sleep 1
kill -TERM "$sink"
wait "$sink" 2>/dev/null || true
echo "sink: $(tail -1 "$work/sink")"
session=$(sed -n 's/^session: //p' "$work/on")
trace=$(find "$MURMUR_HOME/records" -path "*$session*" -name trace.jsonl | head -1)
echo "spans the exporting capsule dropped so far: $(grep -c '"event_type":"spans_dropped"' "$trace" || true) drop record(s); $(grep '"spans_dropped"' "$trace" | tail -1 | python3 -c 'import json,sys; l=sys.stdin.read().strip(); print(json.loads(l)["dropped"] if l else 0)') spans in the first"
