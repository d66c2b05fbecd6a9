#!/usr/bin/env python3
"""What watching costs, figures for BENCHMARKS.md (never asserted in tests).

A formation of 50 offline workers (scripts/harness/worker.sh) runs while a client keeps ten of
them busy (20 tasks a second, each answered at once). GetTask on another member is timed,
3,000 requests on one keep-alive connection, alternately with no watcher and with `mur top`
watching the whole formation in a real terminal (tmux, 200×60): every member's
murmur.WatchSession stream, every trace, the run folder. `mur top`'s own resident memory and
CPU are read from /proc over each watched round.

Usage: scripts/bench/top.py [REQUESTS]   (needs a release build and tmux)
Every process it starts is stopped before it exits; all traffic stays on 127.0.0.1.
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from formation import MUR, formation, launch, stop, worker_manifest  # noqa: E402

MEMBERS = 50
TICK = os.sysconf("SC_CLK_TCK")


def token(home, session):
    out = subprocess.run([MUR, "token", session], env=dict(os.environ, MURMUR_HOME=home),
                         capture_output=True, text=True, check=True).stdout
    return next(l.split()[1] for l in out.splitlines() if l.startswith("operator "))


class Door:
    def __init__(self, port, tok):
        self.port, self.tok = port, tok
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def rpc(self, method, params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        self.conn.request("POST", "/", body, {
            "Host": f"localhost:{self.port}", "Content-Type": "application/json",
            "A2A-Version": "1.0", "Authorization": f"Bearer {self.tok}"})
        return json.loads(self.conn.getresponse().read())


def message(text, immediately):
    return {"message": {"messageId": f"m{time.monotonic_ns()}", "role": "ROLE_USER",
                        "parts": [{"text": text}]},
            "configuration": {"returnImmediately": immediately}}


def busy(doors, stop_at):
    """Keeps the given members working: 20 tasks a second between them."""
    i = 0
    while not stop_at.is_set():
        d = doors[i % len(doors)]
        d.rpc("SendMessage", message(f"task {i}", True))
        i += 1
        stop_at.wait(0.05)


def get_task_round(door, task, n):
    times = []
    for _ in range(n):
        s = time.perf_counter()
        door.rpc("GetTask", {"id": task})
        times.append((time.perf_counter() - s) * 1e6)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99)], sum(times) / len(times)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    if not shutil.which("tmux"):
        raise SystemExit("tmux is needed: apt-get install tmux")
    home = tempfile.mkdtemp(prefix="murmur-bench-home-")
    work = tempfile.mkdtemp(prefix="murmur-bench-")
    sock = os.path.join(work, "tmux.sock")
    proc = None
    stop_at = threading.Event()
    try:
        worker_manifest(os.path.join(work, "worker.yaml"))
        path = os.path.join(work, "formation.yaml")
        formation(path, MEMBERS)
        proc, lines = launch(path, home)
        members = []
        for l in lines:
            if l.startswith("member "):
                port = int(l.split("localhost:")[1].split()[0])
                members.append((port, l.rsplit(" ", 1)[1]))
        target = Door(members[1][0], token(home, members[1][1]))
        done = target.rpc("SendMessage", message("hello", False))
        task = done["result"]["task"]["id"]
        workers = [Door(p, token(home, s)) for p, s in members[2:12]]
        loader = threading.Thread(target=busy, args=(workers, stop_at), daemon=True)
        loader.start()
        get_task_round(target, task, 500)  # warm up
        rows = []
        for rnd in range(3):
            rows.append(("no watcher", *get_task_round(target, task, n), None, None))
            subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "top", "-x", "200",
                            "-y", "60", "--", "env", f"MURMUR_HOME={home}", MUR, "top"], check=True)
            time.sleep(2)
            pid = int(subprocess.run(["tmux", "-S", sock, "display", "-p", "-t", "top",
                                      "#{pane_pid}"], capture_output=True, text=True).stdout)
            t0, c0 = time.monotonic(), cpu_ticks(pid)
            p50, p99, mean = get_task_round(target, task, n)
            time.sleep(max(0.0, 10 - (time.monotonic() - t0)))
            cpu = (cpu_ticks(pid) - c0) / TICK / (time.monotonic() - t0) * 100
            rows.append(("mur top watching 50 members", p50, p99, mean, rss_kb(pid) / 1024, cpu))
            subprocess.run(["tmux", "-S", sock, "kill-server"], check=False)
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
              f"{n} GetTask per round, 20 tasks/s on ten other members")
        print("| round | GetTask p50 µs | p99 µs | mean µs | mur top RSS MB | mur top CPU % |")
        print("|---|---|---|---|---|---|")
        for name, p50, p99, mean, rss, cpu in rows:
            extra = f"{rss:.1f} | {cpu:.1f}" if rss is not None else "- | -"
            print(f"| {name} | {p50:.0f} | {p99:.0f} | {mean:.0f} | {extra} |")
    finally:
        stop_at.set()
        subprocess.run(["tmux", "-S", sock, "kill-server"], check=False, stderr=subprocess.DEVNULL)
        if proc:
            stop(proc)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
