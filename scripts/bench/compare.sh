#!/usr/bin/env bash
# One command for the side-by-side benchmark (BENCHMARKS.md): builds mur and the bare hyper
# server, installs wrk and the official A2A Python SDK's server (a venv under target/bench),
# runs scripts/bench/compare.py (mur, a2a-sdk, bare hyper; GetTask, SendMessage, mixed; memory;
# cancel latency), then the formation, delegation and task start figures.
# Usage: scripts/bench/compare.sh [--seconds N] [--conns 1,16,64] [--cancel-rounds N] [--quick]
#   --quick skips formation.py, delegation.py and task_start.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=0
args=()
for a in "$@"; do
  if [[ $a == --quick ]]; then quick=1; else args+=("$a"); fi
done
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet -p murmur-supervisor
cargo build --release --quiet -p murmur-capsule --example bare_hyper
venv=target/bench/venv
if ! "$venv/bin/python" -c 'import a2a, uvicorn, uvloop' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "a2a-sdk[http-server]==1.3.0" uvicorn uvloop
fi
python3 scripts/bench/compare.py "${args[@]}"
if [[ $quick == 0 ]]; then
  echo; echo "formations:"; python3 scripts/bench/formation.py
  echo; echo "delegation:"; python3 scripts/bench/delegation.py
  echo; echo "task start:"; python3 scripts/bench/task_start.py
fi
