#!/usr/bin/env python3
"""Side-by-side door benchmark (issue 10), figures for BENCHMARKS.md, never asserted in tests.

Starts, one after another on this machine, a capsule (`mur run`), the official A2A Python SDK's
server with a no-op agent (scripts/bench/a2a_sdk_server.py, uvicorn + uvloop) and a bare hyper
server answering a fixed body (capsule/examples/bare_hyper.rs), and runs the same wrk scenarios
against each at every connection count:

  get    GetTask of one completed task
  send   SendMessage with configuration.returnImmediately; besides requests/s, the tasks
         accepted per second (a TASK_STATE_REJECTED "busy" answer is correct, but no work
         done: the SDK completes every task it is sent, a capsule takes what its queue holds)
  mixed  the two, alternating on each connection

Then, on a capsule: its resident memory idle and once it holds 10,000 finished tasks, and the
cancel latency (CancelTask answered, and the harness gone) with a harness that honours SIGINT.

Usage: scripts/bench/compare.py [--seconds N] [--conns 1,16,64] [--cancel-rounds N]
Run it through scripts/bench/compare.sh, which builds and installs what it needs. Every process
it starts is stopped before it exits; all traffic stays on 127.0.0.1.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
MUR = os.path.join(TARGET, "release", "mur")
BARE = os.path.join(TARGET, "release", "examples", "bare_hyper")
VENV_PY = os.path.join(ROOT, "target", "bench", "venv", "bin", "python")
WORKER = os.path.join(ROOT, "scripts", "harness", "worker.sh")
SCENARIOS = [("get", "gettask.lua"), ("send", "send.lua"), ("mixed", "mixed.lua")]
HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}

# The capsule under load: the messaging guide's queued worker (one running, two waiting), with
# a harness that answers at once (`cat` echoes the task), as the SDK's agent does.
NOOP = """name: noop
version: "0.1.0"
artifacts:
  - name: local/noop
    version: "0.1.0"
    runtime: driver
    process:
      command: ["cat"]
inference: { transport: process, driver: { artifact: local/noop } }
lifecycle: { task_acceptance: queue, after_task: sleep, queue_depth: 2 }
"""

# The capsule for cancel latency: the offline worker, whose "wait N" is a sleep that SIGINT ends.
WAITER = f"""name: waiter
version: "0.1.0"
artifacts:
  - name: local/worker
    version: "0.1.0"
    runtime: driver
    process:
      command: ["{WORKER}"]
      interrupt: sigint
inference: {{ transport: process, driver: {{ artifact: local/worker }} }}
lifecycle: {{ task_acceptance: queue, after_task: sleep, queue_depth: 2 }}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rpc(port, method, params, timeout=30):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, headers=HEADERS)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def message(text, immediately=False, mid="bench"):
    params = {"message": {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}}
    if immediately:
        params["configuration"] = {"returnImmediately": True}
    return params


def wait_port(port, proc, what):
    """Waits for `proc` to listen; stops it when it does not."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited before it served (status {proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    stop(proc)
    raise SystemExit(f"{what} did not listen on {port} within 60 s")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Mur:
    """A capsule under `mur run`, in a MURMUR_HOME of its own."""

    name = "mur"

    def __init__(self, manifest_text):
        self.work = tempfile.mkdtemp(prefix="murmur-bench-")
        self.home = tempfile.mkdtemp(prefix="murmur-bench-home-")
        manifest = os.path.join(self.work, "capsule.yaml")
        with open(manifest, "w") as f:
            f.write(manifest_text)
        env = dict(os.environ, MURMUR_HOME=self.home)
        self.proc = subprocess.Popen([MUR, "run", "--manifest", manifest], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True, cwd=self.work)
        self.port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.match(r"murmur: url localhost:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if line.startswith("session: "):
                break
        try:
            if self.port is None:
                raise SystemExit("mur run did not announce its door")
            runs = os.path.join(self.home, "run")
            with open(os.path.join(runs, os.listdir(runs)[0])) as f:
                self.pid = json.load(f)["pid"]
        except BaseException:
            self.stop()
            raise

    def stop(self):
        stop(self.proc)
        subprocess.run(["rm", "-rf", self.work, self.home])


class Sdk:
    name = "a2a-sdk"

    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen([VENV_PY, os.path.join(HERE, "a2a_sdk_server.py"), str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/tmp")
        wait_port(self.port, self.proc, "the a2a-sdk server")

    def stop(self):
        stop(self.proc)


class Bare:
    name = "bare hyper"

    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen([BARE, str(self.port)])
        wait_port(self.port, self.proc, "bare_hyper")

    def stop(self):
        stop(self.proc)


def completed_task(server):
    """A task to GetTask: one answered in full (the bare server answers anything)."""
    if isinstance(server, Bare):
        return "tsk_0"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        task = rpc(server.port, "SendMessage", message("bench"))["result"]["task"]
        if task["status"]["state"] == "TASK_STATE_COMPLETED":
            return task["id"]
        time.sleep(0.2)
    raise SystemExit(f"{server.name} completed no task")


def wrk(port, script, conns, secs, task):
    out = subprocess.run(
        ["wrk", f"-t{min(2, conns)}", f"-c{conns}", f"-d{secs}s", "-s", os.path.join(HERE, script),
         f"http://127.0.0.1:{port}/"],
        env=dict(os.environ, TASK_ID=task), capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"requests/s: (\S+)", out).group(1))
    p50, p99 = map(float, re.search(r"p50: (\S+) ms  p99: (\S+) ms", out).groups())
    errors = int(re.search(r"^errors: (\d+)", out, re.M).group(1))
    rpc_errors = re.search(r"^rpc errors: (\d+)", out, re.M)
    errors += int(rpc_errors.group(1)) if rpc_errors else 0
    r = {"rps": rps, "p50": p50, "p99": p99, "errors": errors}
    for key in ("accepted", "rejected"):
        m = re.search(rf"^{key}/s: (\S+)", out, re.M)
        if m:
            r[key] = float(m.group(1))
    return r


def load(server, conns, secs, results):
    for scenario, script in SCENARIOS:
        for c in conns:
            # A fresh one each run: the sends of a run before may have pushed the last one out
            # of the capsule's 10,000 retained tasks.
            task = completed_task(server)
            r = wrk(server.port, script, c, secs, task)
            if scenario == "get" and not isinstance(server, Bare) and "error" in rpc(
                    server.port, "GetTask", {"id": task}):
                raise SystemExit(f"{server.name}: the task GetTask read is gone; the run measured errors")
            results[(server.name, scenario, c)] = r
            took = (f"  accepted {r['accepted']:,.1f}/s rejected {r['rejected']:,.1f}/s"
                    if "accepted" in r else "")
            print(f"  {server.name:10} {scenario:5} @{c:<3} {r['rps']:>9,.0f}/s  p50 {r['p50']:.2f} ms"
                  f"  p99 {r['p99']:.2f} ms  errors {r['errors']}{took}", flush=True)


def table(results, conns):
    print("\n| scenario | conns | mur req/s (p50 / p99 ms) | a2a-sdk req/s (p50 / p99 ms) "
          "| bare hyper req/s | mur / sdk | mur / hyper |")
    print("|---|---|---|---|---|---|---|")
    for scenario, _ in SCENARIOS:
        for c in conns:
            m, s, b = (results.get((n, scenario, c)) for n in ("mur", "a2a-sdk", "bare hyper"))
            cell = lambda r: f"{r['rps']:,.0f} ({r['p50']:.2f} / {r['p99']:.2f})" if r else "-"
            ratio = lambda a, z: f"{a['rps'] / z['rps']:.1f}" if a and z and z["rps"] else "-"
            pct = lambda a, z: f"{100 * a['rps'] / z['rps']:.0f}%" if a and z and z["rps"] else "-"
            print(f"| {scenario} | {c} | {cell(m)} | {cell(s)} | {b['rps']:,.0f} | {ratio(m, s)} | {pct(m, b)} |"
                  if b else f"| {scenario} | {c} | {cell(m)} | {cell(s)} | - | {ratio(m, s)} | - |")


def accepted_table(results, conns):
    """SendMessage counted by the work taken on: tasks accepted per second, rejections apart."""
    print("\nsend, counting only accepted tasks (a TASK_STATE_REJECTED answer is no work done):")
    print("| conns | mur accepted/s | mur rejected/s | a2a-sdk accepted/s | a2a-sdk rejected/s "
          "| accepted mur / sdk |")
    print("|---|---|---|---|---|---|")
    for c in conns:
        m, s = results.get(("mur", "send", c)), results.get(("a2a-sdk", "send", c))
        if not m or not s or "accepted" not in m or "accepted" not in s:
            continue
        ratio = f"{m['accepted'] / s['accepted']:.2f}" if s["accepted"] else "-"
        print(f"| {c} | {m['accepted']:,.1f} | {m['rejected']:,.1f} | {s['accepted']:,.1f} "
              f"| {s['rejected']:,.1f} | {ratio} |")


def fill(port, tasks):
    """Sends until the capsule holds `tasks` finished tasks (rejected ones are finished)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                           "params": message("fill", immediately=True)}).encode()
        head = (f"POST / HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        f = s.makefile("rb")
        for _ in range(tasks):
            s.sendall(head + body)
            length = 0
            while (line := f.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            f.read(length)


def held(port):
    return rpc(port, "ListTasks", {"pageSize": 1})["result"]["totalSize"]


def memory():
    """RSS of a fresh capsule, and of one holding 10,000 finished tasks."""
    mur = Mur(NOOP)
    try:
        time.sleep(0.5)
        idle = rss_kb(mur.pid)
        fill(mur.port, 10_000)
        time.sleep(1)
        full = rss_kb(mur.pid)
        return idle, full, held(mur.port)
    finally:
        mur.stop()


def descendants(pid):
    """Every process below `pid` (from /proc)."""
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def until(holds, every, failure, limit=30):
    """Polls `holds` every `every` seconds; fails the bench saying `failure` after `limit`."""
    deadline = time.monotonic() + limit
    while not holds():
        if time.monotonic() > deadline:
            raise SystemExit(f"cancel latency: {failure} within {limit} s")
        time.sleep(every)


def cancel_latency(rounds):
    """CancelTask on a working task whose harness sleeps: the answer, and the harness gone."""
    mur = Mur(WAITER)
    answered, gone = [], []
    try:
        for i in range(rounds):
            task = rpc(mur.port, "SendMessage", message("wait 30", True, f"c{i}"))["result"]["task"]["id"]
            until(lambda: rpc(mur.port, "GetTask", {"id": task})["result"]["status"]["state"]
                  == "TASK_STATE_WORKING" and any(
                      open(f"/proc/{p}/comm").read().strip() == "sleep"
                      for p in descendants(mur.pid) if os.path.exists(f"/proc/{p}/comm")),
                  0.01, "the harness never started its work")
            t0 = time.perf_counter()
            rpc(mur.port, "CancelTask", {"id": task})
            t1 = time.perf_counter()
            until(lambda: not descendants(mur.pid), 0.0005, "the harness outlived its cancel")
            t2 = time.perf_counter()
            answered.append((t1 - t0) * 1000)
            gone.append((t2 - t0) * 1000)
            # The worker releases its slot once the task's end is recorded.
            until(lambda: rpc(mur.port, "GetTask", {"id": task})["result"]["status"]["state"]
                  == "TASK_STATE_CANCELED", 0.005, "the canceled task never settled")
    finally:
        mur.stop()
    return answered, gone


def main():
    # A SIGTERM runs every `finally`: no server or temp folder is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--conns", default="1,16,64")
    ap.add_argument("--cancel-rounds", type=int, default=20)
    args = ap.parse_args()
    conns = [int(c) for c in args.conns.split(",")]
    for path, what in ((MUR, "cargo build --release"), (BARE, "cargo build --release --example bare_hyper"),
                       (VENV_PY, "scripts/bench/compare.sh (it makes the venv)")):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{path} is missing: run {what}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') >> 30} GiB; "
          f"wrk {args.seconds} s per cell on the same cores as the server")
    results = {}
    for start in (lambda: Mur(NOOP), Sdk, Bare):
        server = start()
        try:
            load(server, conns, args.seconds, results)
            if isinstance(server, Mur):
                print(f"  mur after the runs: VmRSS {rss_kb(server.pid)} kB, holding {held(server.port)} tasks")
        finally:
            server.stop()
    table(results, conns)
    accepted_table(results, conns)
    idle, full, tasks = memory()
    print(f"\nmemory: idle capsule {idle / 1024:.1f} MB; holding {tasks} finished tasks {full / 1024:.1f} MB")
    if args.cancel_rounds:
        answered, gone = cancel_latency(args.cancel_rounds)
        print(f"cancel ({args.cancel_rounds} rounds): CancelTask answered in {statistics.median(answered):.2f} ms "
              f"median ({max(answered):.2f} max); harness gone after {statistics.median(gone):.2f} ms median "
              f"({max(gone):.2f} max)")


if __name__ == "__main__":
    sys.exit(main())
