#!/usr/bin/env bash
# What the durable store costs the door (docs/store.md): two capsules of the same release build
# serve manifests/worker-queue.yaml, one with its store (the default) and one without
# (MURMUR_STORE=off); wrk against each in turn, ROUNDS times, in one run: GetTask of a completed
# task (a read: memory only); SendMessage with returnImmediately (every answer a new task: the
# few taken are on disk before their answer leaves; the rest, rejected busy, are written without
# being waited for); and tasks run to their end (three clients, each waiting for its answer:
# each task's three changes kept before the answer). Then what the store's files hold. Results
# go in BENCHMARKS.md.
# Usage: scripts/bench/store.sh [SECONDS] [ROUNDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
rounds=${2:-3}
conns=${3:-64}
. scripts/bench/capsules.sh
start off MURMUR_STORE=off
start on
off=$(port_of off)
on=$(port_of on)
task_off=$(task_on "$off")
task_store=$(task_on "$on")
gets() {
  TASK_ID=$2 wrk -t2 -c"$conns" -d"${secs}s" -s scripts/bench/gettask.lua \
    "http://127.0.0.1:$1/" | sed -n 's/^requests\/s: //p'
}
# The capsule's CPU time so far (user + system, in clock ticks), given its door's name; with a
# thread's name, that thread's alone (the store's writer is `store`).
cpu_of() {
  local session pid t
  session=$(sed -n 's/^session: //p' "$work/$1")
  pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$MURMUR_HOME/run/$session.json")
  if [ -z "${2:-}" ]; then awk '{print $14 + $15}' "/proc/$pid/stat"; return; fi
  for t in /proc/"$pid"/task/*; do
    [ "$(cat "$t/comm")" = "$2" ] && awk '{print $14 + $15}' "$t/stat" && return
  done
  echo 0
}
# SendMessage answers a second, their p99 latency, the tasks taken a second (the rest are
# answered TASK_STATE_REJECTED, busy), from send.lua's summary; and the capsule's CPU per
# answer in microseconds, which a shared machine's noise moves less than throughput.
sends() {
  local before after writer_before writer_after rate
  before=$(cpu_of "$2"); writer_before=$(cpu_of "$2" store)
  wrk -t2 -c"$conns" -d"${secs}s" -s scripts/bench/send.lua "http://127.0.0.1:$1/" >"$work/send"
  after=$(cpu_of "$2"); writer_after=$(cpu_of "$2" store)
  rate=$(sed -n 's/^requests\/s: //p' "$work/send")
  per() { python3 -c "import sys; print(f'{(int(sys.argv[2]) - int(sys.argv[1])) * 1e6 / $(getconf CLK_TCK) / (float(sys.argv[3]) * $secs):.1f}')" "$1" "$2" "$rate"; }
  echo "$rate $(sed -n 's/.*p99: \([0-9.]*\) ms/\1ms/p' "$work/send") $(sed -n 's/^accepted\/s: //p' "$work/send") $(per "$before" "$after") $(per "$writer_before" "$writer_after")"
}
# Tasks run to their end a second: 3 connections (the running slot and the queue of 2 that
# manifests/worker-queue.yaml has), each waiting for its task's answer before the next.
runs() {
  WAIT=1 wrk -t1 -c3 -d"${secs}s" -s scripts/bench/send.lua "http://127.0.0.1:$1/" | sed -n 's/^accepted\/s: //p'
}
echo "$conns connections, 2 wrk threads, ${secs}s a run, store off / on alternating:"
for r in $(seq "$rounds"); do
  a=$(gets "$off" "$task_off"); b=$(gets "$on" "$task_store")
  python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'round $r GetTask      off {a:.0f}/s  on {b:.0f}/s  on/off {b/a:.3f}')" "$a" "$b"
  read -r a a99 at acpu _ <<<"$(sends "$off" off)"; read -r b b99 bt bcpu bw <<<"$(sends "$on" on)"
  python3 -c "import sys; a,b=map(float,sys.argv[1:3]); c,d=map(float,sys.argv[7:9]); print(f'round $r SendMessage  off {a:.0f}/s (p99 {sys.argv[3]})  on {b:.0f}/s (p99 {sys.argv[4]})  on/off {b/a:.3f}; tasks taken off {sys.argv[5]}/s on {sys.argv[6]}/s; capsule CPU per answer off {c} us on {d} us (off/on {c/d:.3f}), of which the store writer {sys.argv[9]} us')" "$a" "$b" "$a99" "$b99" "$at" "$bt" "$acpu" "$bcpu" "$bw"
  a=$(runs "$off"); b=$(runs "$on")
  python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'round $r tasks run    off {a:.1f}/s  on {b:.1f}/s  on/off {b/a:.3f}')" "$a" "$b"
done
session=$(sed -n 's/^session: //p' "$work/on")
store=$(find "$MURMUR_HOME/records" -path "*$session*" -type d -name store | head -1)
echo "the store after the runs: $(du -sh "$store" | cut -f1) in $(ls "$store" | tr '\n' ' ')"
