#!/usr/bin/env python3
"""Task start and sequential task rate against the physical limit, figures for BENCHMARKS.md
(never asserted in tests).

One run, on this machine, of the same no-op harness (`date +%s%N`: it prints the moment it runs
and exits, so the task's answer says when the harness process was running):
1. mur, namespace mode (the jail: user, mount, PID, network, IPC and UTS namespaces, the files
   wall, the limits, the ways out handed to the capsule): blocking SendMessages, one after
   another;
2. mur, fallback mode (no namespaces), the same;
3. a bare `unshare --user --map-current-user --pid --fork --mount --mount-proc --net --ipc --uts
   date` loop: the namespaces every jailed attempt gets, so the physical limit the rates are
   measured against;
4. the same loop without `--ipc --uts`, the limit as it was measured before the jail had them;
5. a bare posix_spawn + wait loop of `date` (Python's subprocess).
The five are interleaved in chunks (mur, mur, unshare, unshare, spawn, again and again), so a load that
comes and goes on a shared machine falls on all of them alike: compare the ratios.
Per row: ms per task and tasks per second (sequential), the rate as a fraction of the unshare
loop's, mur's overhead over each loop in ms, and the task start latency (median and p90): from
just before the request is sent (or the process spawned) to the moment the harness runs.

With MUR_BEFORE=/path/to/another/mur, that binary's two modes are interleaved as rows too, so a
before and after come from one run.

Usage: scripts/bench/task_start.py [ROUNDS] [CHUNK]   (needs a release build: cargo build --release)
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
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
MUR = os.path.join(TARGET, "release", "mur")

MANIFEST = """name: cat
version: "0.1.0"
artifacts:
  - name: local/cat
    version: "0.1.0"
    runtime: driver
    process:
      command: ["/bin/date", "+%s%N"]
inference:
  transport: process
lifecycle:
  task_acceptance: queue
  after_task: sleep
  queue_depth: 2
"""


def send(port, n):
    """One blocking SendMessage; answers (seconds it took, seconds from sending to the harness
    running)."""
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": {
        "message": {"messageId": f"m{n}", "role": "ROLE_USER", "parts": [{"text": f"task {n}"}]}}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, headers={
        "content-type": "application/json", "a2a-version": "1.0"})
    sent = time.time_ns()
    began = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as r:
        task = json.load(r)["result"]["task"]
    took = time.perf_counter() - began
    state = task["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        raise SystemExit(f"task {n} ended {state}: {json.dumps(task)[:400]}")
    return took, (harness_time(json.dumps(task)) - sent) / 1e9


def harness_time(text):
    """The nanosecond timestamp `date +%s%N` printed, wherever the answer carries it."""
    import re
    found = re.findall(r"\b1[0-9]{18}\b", text)
    if not found:
        raise SystemExit(f"no harness timestamp in the answer: {text[:300]}")
    return int(found[-1])


class Mur:
    """A capsule in `mode`, started once and sent tasks chunk by chunk."""

    def __init__(self, mode, tmp, mur=MUR, tag=""):
        home = os.path.join(tmp, f"home-{mode}{tag}")
        os.makedirs(home)
        manifest = os.path.join(tmp, f"date-{mode}{tag}.yaml")
        with open(manifest, "w") as f:
            f.write(MANIFEST)
        env = dict(os.environ, MURMUR_HOME=home, MURMUR_CONTAINMENT=mode)
        self.proc = subprocess.Popen([mur, "run", "--manifest", manifest], cwd=tmp, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        self.port = int(self.proc.stdout.readline().strip().rsplit(":", 1)[1])
        self.proc.stdout.readline()
        self.n = 0

    def run(self, rounds):
        out = []
        for _ in range(rounds):
            self.n += 1
            out.append(send(self.port, self.n))
        return out

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=30)


class Loop:
    """A bare loop: spawn `argv`, wait for it, read the time it printed."""

    def __init__(self, argv):
        self.argv = argv

    def run(self, rounds):
        out = []
        for _ in range(rounds):
            sent = time.time_ns()
            began = time.perf_counter()
            done = subprocess.run(self.argv, input=b"x", stdout=subprocess.PIPE, check=True)
            out.append((time.perf_counter() - began, (int(done.stdout) - sent) / 1e9))
        return out

    def stop(self):
        pass


LIMIT = "unshare --user --pid --mount --mount-proc --net --ipc --uts date"


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    chunk = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    if not os.path.exists(MUR):
        raise SystemExit("build first: cargo build --release")
    tmp = tempfile.mkdtemp(prefix="murmur-bench-start-")
    rows = {}
    try:
        before = os.environ.get("MUR_BEFORE")
        if before:
            rows["before: mur, namespace mode"] = Mur("namespaces", tmp, before, "-before")
            rows["before: mur, fallback mode"] = Mur("fallback", tmp, before, "-before")
        rows["mur, namespace mode (the jail)"] = Mur("namespaces", tmp)
        rows["mur, fallback mode"] = Mur("fallback", tmp)
        bare = ["unshare", "--user", "--map-current-user", "--pid", "--fork", "--mount",
                "--mount-proc", "--net"]
        rows[LIMIT] = Loop(bare + ["--ipc", "--uts", "date", "+%s%N"])
        rows["unshare … --net date (no --ipc --uts)"] = Loop(bare + ["date", "+%s%N"])
        rows["posix_spawn + wait of date"] = Loop(["date", "+%s%N"])
        results = {name: [] for name in rows}
        for what in rows.values():
            what.run(10)
        done = 0
        while done < rounds:
            n = min(chunk, rounds - done)
            for name, what in rows.items():
                results[name].extend(what.run(n))
            done += n
    finally:
        for what in rows.values():
            what.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    per = {name: sum(t for t, _ in r) / len(r) for name, r in results.items()}
    unshare = per[LIMIT]
    spawn = per["posix_spawn + wait of date"]
    print(f"{rounds} sequential tasks each, interleaved in chunks of {chunk}; the harness is "
          f"`date +%s%N` (a no-op that says when it ran)")
    print("| what | ms per task | tasks/s | rate vs unshare loop | overhead vs unshare (ms) "
          "| overhead vs spawn (ms) | start latency p50 / p90 (ms) |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        starts = [s * 1000 for _, s in r]
        print(f"| {name} | {per[name] * 1000:.2f} | {1 / per[name]:.0f} | {unshare / per[name]:.2f} "
              f"| {(per[name] - unshare) * 1000:+.2f} | {(per[name] - spawn) * 1000:+.2f} "
              f"| {pct(starts, 0.5):.2f} / {pct(starts, 0.9):.2f} |")


if __name__ == "__main__":
    main()
