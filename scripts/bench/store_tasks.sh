#!/usr/bin/env bash
# Tasks run to their end a second (three clients, each waiting for its answer) on two capsules
# of manifests/worker-queue.yaml, A then B, four rounds of 10 s: with A=off B=off (the default)
# it shows what this machine's noise alone makes of the ratio; A=off B=on and A=on B=off, what
# the store costs with either order. Results go in BENCHMARKS.md ("The store").
# Usage: [A=on|off] [B=on|off] scripts/bench/store_tasks.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/capsules.sh
start a MURMUR_STORE=${A:-off}
start b MURMUR_STORE=${B:-off}
pa=$(port_of a); pb=$(port_of b)
runs() { WAIT=1 wrk -t1 -c3 -d10s -s scripts/bench/send.lua "http://127.0.0.1:$1/" | sed -n 's/^accepted\/s: //p'; }
for r in 1 2 3 4; do x=$(runs $pa); y=$(runs $pb); echo "A=${A:-off} $x  B=${B:-off} $y  b/a $(python3 -c "print(round($y/$x,3))")"; done
