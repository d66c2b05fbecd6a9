#!/usr/bin/env python3
"""A door under hostile load, figures for BENCHMARKS.md (never asserted in tests).

One run, on this machine, of a public capsule (a `/bin/cat` harness):
1. unloaded: a well-behaved client's ListTasks, ROUNDS one after another: p50 and p99;
2. loaded: the same client while, all at once, 1,000 connections sit idle, 32 clients trickle
   2 MiB bodies a byte at a time, and 4 threads send 20,000 hostile requests (bodies that are not
   JSON, a foreign Host, a cross-site Origin, a body declared past the limit, a wrong A2A-Version,
   a crafted pageToken): p50, p99, how many of its requests went unanswered, and the ratio to (1);
3. the capsule's RSS before, at its peak during (2) (sampled every 50 ms), and after.

Usage: scripts/bench/hostile.py [ROUNDS]   (needs a release build: cargo build --release)
Every process and connection it starts is closed before it exits; all traffic stays on
127.0.0.1.
"""
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

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
      command: ["/bin/cat"]
inference:
  transport: process
lifecycle:
  task_acceptance: queue
  after_task: sleep
  queue_depth: 2
"""


def request(port, body, headers=None, timeout=10):
    """One POST /, its status line, or None when it got no answer."""
    head = {"Host": f"localhost:{port}", "Content-Type": "application/json",
            "A2A-Version": "1.0", "Connection": "close", "Content-Length": str(len(body))}
    head.update(headers or {})
    raw = "POST / HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(raw.encode() + body)
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.split(b"\r\n", 1)[0].decode() or None
    except OSError:
        return None


LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).encode()


def well_behaved(port, rounds):
    times, missed = [], 0
    for _ in range(rounds):
        t = time.perf_counter()
        status = request(port, LIST)
        if status is None or " 200 " not in status:
            missed += 1
            continue
        times.append(time.perf_counter() - t)
    times.sort()
    pick = lambda q: times[min(len(times) - 1, int(q * len(times)))] * 1000 if times else float("nan")
    return pick(0.5), pick(0.99), missed


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def hostile(port, count, stop):
    bad = [
        (b"not json", {}),
        (LIST, {"Host": "attacker.example"}),
        (LIST, {"Origin": "http://attacker.example"}),
        (b"{}", {"Content-Length": str(1 << 40)}),
        (LIST, {"A2A-Version": "0.3"}),
        (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {
            "pageToken": base64.b64encode(b"1:tsk_01a1").decode()}}).encode(), {}),
    ]
    for i in range(count):
        if stop.is_set():
            return
        body, headers = bad[i % len(bad)]
        request(port, body, headers, timeout=5)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    tmp = tempfile.mkdtemp(prefix="murmur-hostile-")
    manifest = os.path.join(tmp, "cat.yaml")
    with open(manifest, "w") as f:
        f.write(MANIFEST)
    env = dict(os.environ, MURMUR_HOME=os.path.join(tmp, "home"))
    run = subprocess.Popen([MUR, "run", "--manifest", manifest], cwd=tmp, env=env,
                           stdout=subprocess.PIPE, text=True)
    port = int(run.stdout.readline().split(":")[-1])
    run.stdout.readline()
    capsule = int(subprocess.check_output(["pgrep", "-P", str(run.pid)]).split()[0])
    held = []
    try:
        well_behaved(port, 50)
        before = rss_kb(capsule)
        p50, p99, missed = well_behaved(port, rounds)
        print(f"unloaded:  p50 {p50:.2f} ms  p99 {p99:.2f} ms  unanswered {missed}/{rounds}")

        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(f"POST / HTTP/1.1\r\nHost: localhost:{port}\r\n".encode())
            held.append(s)
        slow = []
        for _ in range(32):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall((f"POST / HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\n"
                       f"A2A-Version: 1.0\r\nContent-Length: {2 << 20}\r\n\r\n{{").encode())
            slow.append(s)
        held.extend(slow)
        stop = threading.Event()
        peak = [before]

        def trickle():
            while not stop.is_set():
                for s in slow:
                    try:
                        s.sendall(b" ")
                    except OSError:
                        pass
                stop.wait(1)

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_kb(capsule))
                stop.wait(0.05)

        workers = [threading.Thread(target=hostile, args=(port, 5000, stop)) for _ in range(4)]
        extra = [threading.Thread(target=trickle), threading.Thread(target=sample)]
        for t in workers + extra:
            t.start()
        lp50, lp99, lmissed = well_behaved(port, rounds)
        for t in workers:
            t.join()
        stop.set()
        for t in extra:
            t.join()
        print(f"loaded:    p50 {lp50:.2f} ms  p99 {lp99:.2f} ms  unanswered {lmissed}/{rounds}  "
              f"p99 ratio {lp99 / p99:.1f}x")
        for s in held:
            s.close()
        held = []
        time.sleep(1)
        print(f"RSS:       before {before / 1024:.1f} MB  peak {peak[0] / 1024:.1f} MB  "
              f"after {rss_kb(capsule) / 1024:.1f} MB")
    finally:
        for s in held:
            s.close()
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(timeout=20)
        except subprocess.TimeoutExpired:
            run.kill()


if __name__ == "__main__":
    main()
