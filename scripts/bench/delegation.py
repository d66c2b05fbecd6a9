#!/usr/bin/env python3
"""Delegation benchmark (issue: delegation), figures for BENCHMARKS.md, never asserted in tests.

A capsule's harness runs `mur delegate-task child x` ROUNDS times, timed inside the harness
(bash's EPOCHREALTIME): each round starts a sub-capsule whose harness answers at once, waits
for its completion and prints it. Beside it: launching the same child capsule with
`mur run --task x` from a shell, to its answer and exit.

Usage: scripts/bench/delegation.py [ROUNDS]   (needs a release build: cargo build --release)
Every process it starts ends before it exits; all traffic stays on 127.0.0.1.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
MUR = os.path.join(TARGET, "release", "mur")

CHILD = """name: child
version: "0.1.0"
artifacts:
  - name: local/instant
    version: "0.1.0"
    runtime: driver
    process:
      command: ["sh", "-c", "echo ok"]
inference: { transport: process, driver: { artifact: local/instant } }
lifecycle: { task_acceptance: single, after_task: exit }
"""


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    if not os.access(MUR, os.X_OK):
        raise SystemExit("build first: cargo build --release")
    work = tempfile.mkdtemp(prefix="murmur-bench-")
    home = tempfile.mkdtemp(prefix="murmur-bench-home-")
    env = dict(os.environ, MURMUR_HOME=home)
    try:
        with open(os.path.join(work, "child.yaml"), "w") as f:
            f.write(CHILD)
        script = os.path.join(work, "parent.sh")
        with open(script, "w") as f:
            f.write(f"""#!/usr/bin/env bash
set -euo pipefail
cat > /dev/null
for i in $(seq {rounds}); do
  s=${{EPOCHREALTIME/./}}; mur delegate-task child x > /dev/null; e=${{EPOCHREALTIME/./}}
  echo $(( e - s ))
done
""")
        os.chmod(script, 0o755)
        with open(os.path.join(work, "parent.yaml"), "w") as f:
            f.write(f"""name: parent
version: "0.1.0"
artifacts:
  - name: local/parent
    version: "0.1.0"
    runtime: driver
    process:
      command: ["{script}"]
inference: {{ transport: process, driver: {{ artifact: local/parent }} }}
lifecycle: {{ task_acceptance: single, after_task: exit }}
capabilities: {{ delegate: {{ allow: [child.yaml] }} }}
""")
        out = subprocess.run([MUR, "run", "--manifest", os.path.join(work, "parent.yaml"), "--task", "go"],
                             capture_output=True, text=True, env=env, cwd=work, timeout=600)
        if out.returncode != 0:
            raise SystemExit(f"the parent failed: {out.stderr}")
        rounds_us = [int(x) for x in out.stdout.split() if x.isdigit()]
        runs = []
        for _ in range(rounds):
            s = time.monotonic()
            subprocess.run([MUR, "run", "--manifest", os.path.join(work, "child.yaml"), "--task", "x"],
                           capture_output=True, env=env, cwd=work, timeout=120, check=True)
            runs.append((time.monotonic() - s) * 1e6)
        print(f"delegate-task round trip, {len(rounds_us)} rounds: median {median(rounds_us) / 1000:.1f} ms")
        print(f"mur run of the same capsule to its answer and exit: median {median(runs) / 1000:.1f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
