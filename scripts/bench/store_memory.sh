#!/usr/bin/env bash
# An idle capsule's resident memory with the durable store (docs/store.md), release build of
# manifests/worker-queue.yaml: new (no store file yet), after one task, and reopened by
# `mur run --resume` after a clean stop (its store read back). VmRSS, and its two parts: the
# process's own memory (RssAnon) and the binary's pages it touched (RssFile, shared with every
# other capsule of the same `mur`). Results go in BENCHMARKS.md ("The store").
# Usage: scripts/bench/store_memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet
export MURMUR_HOME=$(mktemp -d)
work=$(mktemp -d)
run=
trap '[ -n "$run" ] && kill -TERM "$run" 2>/dev/null; wait 2>/dev/null; rm -rf "$MURMUR_HOME" "$work"' EXIT

# up OUT ARGS...: `mur ARGS` in the background until it announces its session.
up() {
  local out=$1; shift
  ./target/release/mur "$@" >"$work/$out" 2>&1 &
  run=$!
  for _ in $(seq 200); do grep -q '^session:' "$work/$out" && return; sleep 0.05; done
  echo "not announced: $(cat "$work/$out")" >&2; exit 1
}
# rss WHAT: the capsule's figures, once it has been idle a second.
rss() {
  local pid
  pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$MURMUR_HOME/run/$session.json")
  sleep 1
  awk -v what="$1" '/^VmRSS|^RssAnon|^RssFile/ {v[$1] = $2} END {printf "%-34s VmRSS %6d kB  RssAnon %5d kB  RssFile %6d kB\n", what, v["VmRSS:"], v["RssAnon:"], v["RssFile:"]}' "/proc/$pid/status"
}
stop() { kill -TERM "$run"; wait "$run" || true; run=; }

up new run --manifest manifests/worker-queue.yaml
session=$(sed -n 's/^session: //p' "$work/new")
port=$(sed -n 's/^murmur: url localhost://p' "$work/new")
rss "idle, new session (no store file)"
curl -s -X POST "http://127.0.0.1:$port/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
  -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"bench"}]}}}' >/dev/null
rss "after one task"
stop
up back run --resume "$session"
rss "idle, reopened (mur run --resume)"
stop
echo "mur binary: $(stat -c %s target/release/mur) bytes"
