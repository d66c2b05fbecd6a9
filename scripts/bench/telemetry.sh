#!/usr/bin/env bash
# What OpenTelemetry export costs the door (docs/telemetry.md): GetTask throughput of two idle
# capsules of the same build, one exporting to a local OTLP/HTTP sink
# (scripts/bench/otlp_sink.py, which answers without decoding) and one with export off, wrk
# against each in turn, ROUNDS times, in one run: polls without a traceparent (no span), then
# polls that each carry one (a SERVER span each, exported). CPU seconds of both capsules and
# the sink over the runs. Then what the sink took and what the
# exporting capsule dropped (its trace's spans_dropped records). Results go in BENCHMARKS.md.
# Usage: scripts/bench/telemetry.sh [SECONDS] [ROUNDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
rounds=${2:-3}
conns=${3:-64}
. scripts/bench/capsules.sh

python3 scripts/bench/otlp_sink.py >"$work/sink" &
pids+=($!)
sink=$!
for _ in $(seq 100); do grep -q '^listening' "$work/sink" && break; sleep 0.05; done
sink_port=$(awk '/^listening/{print $2}' "$work/sink")

start off OTEL_SDK_DISABLED=true
start on OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$sink_port"
off=$(port_of off)
on=$(port_of on)
task_off=$(task_on "$off")
task_exp=$(task_on "$on")

# rate PORT TASK TRACEPARENT: GetTask requests a second (each carrying TRACEPARENT when set).
rate() {
  TASK_ID=$2 TRACEPARENT=$3 wrk -t2 -c"$conns" -d"${secs}s" -s scripts/bench/gettask.lua \
    "http://127.0.0.1:$1/" | sed -n 's/^requests\/s: //p'
}
traced=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
# CPU seconds (user + system) a process has used so far.
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"; }
capsule_of() {
  python3 -c "import json,glob,sys; print([json.load(open(f))['pid'] for f in glob.glob(sys.argv[1]+'/run/*.json') if json.load(open(f))['url'].endswith(':'+sys.argv[2])][0])" "$MURMUR_HOME" "$1"
}
off_pid=$(capsule_of "$off")
on_pid=$(capsule_of "$on")
cpu_off0=$(cpu "$off_pid"); cpu_on0=$(cpu "$on_pid"); cpu_sink0=$(cpu "$sink")
echo "GetTask, $conns connections, 2 wrk threads, ${secs}s a run, export off / on alternating:"
# Untraced polls (no traceparent: the door spans none) and traced ones (every poll a span,
# exported), each against export off.
for r in $(seq "$rounds"); do
  for parent in "" "$traced"; do
    a=$(rate "$off" "$task_off" "$parent")
    b=$(rate "$on" "$task_exp" "$parent")
    what=$([ -n "$parent" ] && echo traced || echo plain)
    python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'round $r {sys.argv[3]:<7} off {a:.0f}/s  on {b:.0f}/s  on/off {b/a:.3f}')" "$a" "$b" "$what"
  done
done
sleep 1
echo "CPU seconds over the runs: capsule off $(python3 -c "print(round($(cpu "$off_pid") - $cpu_off0, 2))"), capsule on $(python3 -c "print(round($(cpu "$on_pid") - $cpu_on0, 2))"), sink $(python3 -c "print(round($(cpu "$sink") - $cpu_sink0, 2))")"
kill -TERM "$sink"
wait "$sink" 2>/dev/null || true
echo "sink: $(tail -1 "$work/sink")"
session=$(sed -n 's/^session: //p' "$work/on")
trace=$(find "$MURMUR_HOME/records" -path "*$session*" -name trace.jsonl | head -1)
echo "spans the exporting capsule dropped so far: $(grep -c '"event_type":"spans_dropped"' "$trace" || true) drop record(s); $(grep '"spans_dropped"' "$trace" | tail -1 | python3 -c 'import json,sys; l=sys.stdin.read().strip(); print(json.loads(l)["dropped"] if l else 0)') spans in the first"
