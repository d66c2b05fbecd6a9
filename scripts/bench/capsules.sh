# Sourced by the benchmarks that compare capsules of one build side by side (telemetry.sh,
# store.sh): a MURMUR_HOME and work folder of their own, removed with every capsule at exit,
# and the capsules started, found and given a completed task. Needs wrk (installed here when
# missing) and a release build.
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet
export MURMUR_HOME=$(mktemp -d)
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$MURMUR_HOME" "$work"' EXIT

# start NAME [ENV...]: a capsule of manifests/worker-queue.yaml, its output in $work/NAME (not
# in a subshell: its pid must reach the trap).
start() {
  local name=$1; shift
  env "$@" ./target/release/mur run --manifest manifests/worker-queue.yaml >"$work/$name" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do grep -q '^session:' "$work/$name" && break; sleep 0.05; done
}
port_of() { sed -n 's/^murmur: url localhost://p' "$work/$1"; }

# task_on PORT: a task run to its end on that door; prints its id.
task_on() {
  curl -s -X POST "http://127.0.0.1:$1/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER","parts":[{"text":"bench"}]}}}' \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])'
}
