#!/usr/bin/env python3
"""Task start and sequential task rate against the physical limit, figures for BENCHMARKS.md
(never asserted in tests).

One run, on this machine, of the same no-op harness (`/bin/cat`, which echoes the task back):
1. mur, namespace mode (the jail: user, mount, PID and network namespaces, the files wall, the
   ways out handed to the capsule): ROUNDS blocking SendMessages, one after another;
2. mur, fallback mode (no namespaces), the same;
3. a bare `unshare --user --map-current-user --pid --fork --mount --mount-proc --net cat` loop;
4. a bare fork/exec loop of `cat`.
Each prints ms per task and tasks per second; mur's rows also its ratio to the unshare loop.

Usage: scripts/bench/task_start.py [ROUNDS]   (needs a release build: cargo build --release)
Every process it starts is stopped before it exits; all traffic stays on 127.0.0.1.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MUR = os.path.join(ROOT, "target", "release", "mur")

MANIFEST = """name: cat
version: "0.1.0"
artifacts:
  - name: local/cat
    version: "0.1.0"
    runtime: driver
    process:
      command: ["/bin/cat"]
inference:
  transport: process
lifecycle:
  task_acceptance: queue
  after_task: sleep
  queue_depth: 2
"""


def send(port, n):
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": {
        "message": {"messageId": f"m{n}", "role": "ROLE_USER", "parts": [{"text": f"task {n}"}]}}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, headers={
        "content-type": "application/json", "a2a-version": "1.0"})
    with urllib.request.urlopen(req, timeout=30) as r:
        state = json.load(r)["result"]["task"]["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        raise SystemExit(f"task {n} ended {state}")


def mur_rate(mode, rounds, tmp):
    home = os.path.join(tmp, f"home-{mode}")
    os.makedirs(home)
    manifest = os.path.join(tmp, f"cat-{mode}.yaml")
    with open(manifest, "w") as f:
        f.write(MANIFEST)
    env = dict(os.environ, MURMUR_HOME=home, MURMUR_CONTAINMENT=mode)
    proc = subprocess.Popen([MUR, "run", "--manifest", manifest], cwd=tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        port = int(proc.stdout.readline().strip().rsplit(":", 1)[1])
        proc.stdout.readline()
        for n in range(10):
            send(port, n)
        started = time.perf_counter()
        for n in range(rounds):
            send(port, 100 + n)
        return (time.perf_counter() - started) / rounds
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def loop_rate(argv, rounds):
    for _ in range(10):
        subprocess.run(argv, input=b"x", stdout=subprocess.DEVNULL, check=True)
    started = time.perf_counter()
    for _ in range(rounds):
        subprocess.run(argv, input=b"x", stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) / rounds


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    if not os.path.exists(MUR):
        raise SystemExit("build first: cargo build --release")
    tmp = tempfile.mkdtemp(prefix="murmur-bench-start-")
    try:
        unshare = loop_rate(["unshare", "--user", "--map-current-user", "--pid", "--fork", "--mount",
                             "--mount-proc", "--net", "cat"], rounds)
        bare = loop_rate(["cat"], rounds)
        rows = [("mur, namespace mode (the jail)", mur_rate("namespaces", rounds, tmp)),
                ("mur, fallback mode", mur_rate("fallback", rounds, tmp)),
                ("unshare --user --pid --mount --mount-proc --net cat", unshare),
                ("fork/exec cat", bare)]
        print(f"{rounds} sequential tasks, each a no-op harness (cat):")
        print(f"| what | ms per task | tasks/s | rate vs the unshare loop |")
        print(f"|---|---|---|---|")
        for name, secs in rows:
            print(f"| {name} | {secs * 1000:.2f} | {1 / secs:.0f} | {unshare / secs:.2f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
