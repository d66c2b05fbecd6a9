#!/usr/bin/env python3
"""Formation benchmarks (issue: formations), figures for BENCHMARKS.md, never asserted in tests.

1. Ready time: from starting `mur run` on a formation of N members (a lead that calls the N-1
   others, offline workers all) to the entry's `session:` line (every member's door ready),
   for N = 10, 50, 500, beside the time this machine takes to fork/exec N `true` processes one
   after another and bind N loopback sockets. With MUR_BEFORE=/path/to/another/mur, each size
   is launched with that binary too, alternately, so a before and after come from one run.
2. call-member overhead: a lead calls a worker with `mur call-member` ROUNDS times; the overhead
   of one call is its round trip minus the worker's own task time (from the worker's trace),
   beside a raw loopback HTTP round trip (GetTask on the same door).

Usage: scripts/bench/formation.py [ROUNDS] [--sizes 10,50,500] [--home-under DIR] [--ready-only]
(needs a release build: cargo build --release). Each launch gets a MURMUR_HOME of its own, a
new folder under DIR (default: the system's temporary folder).
Every process it starts is stopped before it exits; all traffic stays on 127.0.0.1.
"""
import argparse
import json
import os
import socket
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
MUR = os.path.join(TARGET, "release", "mur")
WORKER = os.path.join(ROOT, "scripts", "harness", "worker.sh")


def worker_manifest(path):
    with open(path, "w") as f:
        f.write(f"""name: worker
version: "0.1.0"
artifacts:
  - name: local/driver-worker
    version: "0.1.0"
    runtime: driver
    process:
      command: ["{WORKER}"]
inference:
  transport: process
  driver: {{ artifact: local/driver-worker }}
lifecycle: {{ task_acceptance: queue, after_task: sleep, queue_depth: 100 }}
exports: {{ peer_tasks: {{ accept: true }} }}
""")


def formation(path, n, lead=None):
    members = "".join(f"    w{i}: {{ manifest: worker.yaml }}\n" for i in range(n))
    entry = "w0"
    if lead:
        members = f"    lead: {{ manifest: {lead}, calls: [w0] }}\n" + members
        entry = "lead"
    with open(path, "w") as f:
        f.write(f'formation:\n  name: bench\n  version: "0.1.0"\n  entry: {entry}\n  members:\n{members}')


def lead_formation(path, n):
    """N members: w0 the entry, calling the N-1 others."""
    calls = ", ".join(f"w{i}" for i in range(1, n))
    members = f"    w0: {{ manifest: worker.yaml, calls: [{calls}] }}\n" + "".join(
        f"    w{i}: {{ manifest: worker.yaml }}\n" for i in range(1, n))
    with open(path, "w") as f:
        f.write(f'formation:\n  name: bench\n  version: "0.1.0"\n  entry: w0\n  members:\n{members}')


def launch(manifest, home, args=(), mur=MUR):
    env = dict(os.environ, MURMUR_HOME=home)
    proc = subprocess.Popen([mur, "run", "--manifest", manifest, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("session: "):
            return proc, lines
    proc.kill()
    raise SystemExit(f"the formation was not announced: {lines} {proc.stderr.read()}")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def ready_time(work, n, mur, homes):
    """Launches N members and stops them. Their MURMUR_HOME is kept until the whole run ends: on
    ext4 without a journal, a file created soon after thousands were deleted nearby pays to skip
    each of their inodes, so removing one launch's records at once would charge the next."""
    home = tempfile.mkdtemp(prefix="murmur-bench-home-", dir=homes)
    path = os.path.join(work, f"formation-{n}.yaml")
    lead_formation(path, n)
    start = time.monotonic()
    proc, _ = launch(path, home, mur=mur)
    took = time.monotonic() - start
    stop(proc)
    return took


def fork_exec(n):
    """N `true` processes one after another, and N loopback sockets bound."""
    start = time.monotonic()
    subprocess.run(["bash", "-c", f"for i in $(seq {n}); do /bin/true; done"], check=True)
    sockets = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        sockets.append(s)
    took = time.monotonic() - start
    for s in sockets:
        s.close()
    return took


def call_member_overhead(work, rounds):
    home = tempfile.mkdtemp(prefix="murmur-bench-home-")
    lead_script = os.path.join(work, "lead.sh")
    with open(lead_script, "w") as f:
        f.write(f"""#!/usr/bin/env bash
set -euo pipefail
cat > /dev/null
for i in $(seq {rounds}); do
  s=${{EPOCHREALTIME/./}}; mur call-member w0 "round $i" > /dev/null; e=${{EPOCHREALTIME/./}}
  echo $(( e - s ))
done
""")
    os.chmod(lead_script, 0o755)
    with open(os.path.join(work, "lead.yaml"), "w") as f:
        f.write(f"""name: lead
version: "0.1.0"
artifacts:
  - name: local/lead
    version: "0.1.0"
    runtime: driver
    process:
      command: ["{lead_script}"]
inference:
  transport: process
  driver: {{ artifact: local/lead }}
lifecycle: {{ task_acceptance: single, after_task: exit }}
""")
    path = os.path.join(work, "call.yaml")
    formation(path, 1, lead="lead.yaml")
    try:
        proc, lines = launch(path, home, ["--task", "go"])
        worker_session = next(l.split(" session ")[1] for l in lines if l.startswith("member w0:"))
        worker_port = int(next(l.split("localhost:")[1].split(" ")[0] for l in lines if l.startswith("member w0:")))
        out, err = proc.communicate(timeout=600)
        calls_us = [int(x) for x in out.split() if x.isdigit()]
        trace = []
        for root, _, files in os.walk(os.path.join(home, "records")):
            if root.endswith(worker_session) and "trace.jsonl" in files:
                with open(os.path.join(root, "trace.jsonl")) as t:
                    trace = [json.loads(l) for l in t if l.strip()]
        worker_us = [e["duration_ms"] * 1000 for e in trace if e.get("event_type") == "task_end" and "duration_ms" in e]
        return calls_us, worker_us, worker_port
    finally:
        shutil.rmtree(home, ignore_errors=True)


def raw_round_trip(rounds):
    """GetTask-free raw loopback HTTP round trip: the agent card of a lone capsule."""
    home = tempfile.mkdtemp(prefix="murmur-bench-home-")
    work = tempfile.mkdtemp(prefix="murmur-bench-")
    try:
        path = os.path.join(work, "worker.yaml")
        worker_manifest(path)
        proc, lines = launch(path, home)
        port = int(lines[0].split("localhost:")[1])
        url = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
        times = []
        for _ in range(rounds):
            s = time.monotonic()
            urllib.request.urlopen(url, timeout=10).read()
            times.append((time.monotonic() - s) * 1e6)
        stop(proc)
        return times
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=50)
    ap.add_argument("--sizes", default="10,50,500")
    ap.add_argument("--home-under", default=None)
    ap.add_argument("--ready-only", action="store_true")
    args = ap.parse_args()
    if not os.access(MUR, os.X_OK):
        raise SystemExit("build first: cargo build --release")
    builds = [("mur", MUR)]
    if os.environ.get("MUR_BEFORE"):
        builds.insert(0, ("before", os.environ["MUR_BEFORE"]))
    work = tempfile.mkdtemp(prefix="murmur-bench-")
    homes = tempfile.mkdtemp(prefix="murmur-bench-homes-", dir=args.home_under)
    try:
        worker_manifest(os.path.join(work, "worker.yaml"))
        print(f"ready time: a lead calling N-1 offline workers, to the entry's `session:` line; "
              f"MURMUR_HOME under {args.home_under or tempfile.gettempdir()}")
        print("| members | " + " | ".join(f"{name} ready (s)" for name, _ in builds)
              + " | fork/exec true + bind (s) | ready / baseline |")
        print("|---|" + "---|" * len(builds) + "---|---|")
        for n in (int(x) for x in args.sizes.split(",")):
            ready = [ready_time(work, n, mur, homes) for _, mur in builds]
            bare = fork_exec(n)
            print(f"| {n} | " + " | ".join(f"{r:.3f}" for r in ready)
                  + f" | {bare:.3f} | {ready[-1] / bare:.1f} |", flush=True)
        if args.ready_only:
            return
        calls, worker, _ = call_member_overhead(work, args.rounds)
        raw = raw_round_trip(args.rounds)
        overhead = [c - w for c, w in zip(calls, worker)]
        print(f"call-member, {len(calls)} calls: median round trip {median(calls) / 1000:.2f} ms, "
              f"worker task {median(worker) / 1000:.2f} ms, overhead {median(overhead) / 1000:.2f} ms "
              f"(target < 3 ms)")
        print(f"raw loopback HTTP round trip (python urllib, agent card): median {median(raw) / 1000:.2f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(homes, ignore_errors=True)


if __name__ == "__main__":
    main()
