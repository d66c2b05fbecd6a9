#!/usr/bin/env python3
"""The model gateway against the physical limit, figures for BENCHMARKS.md (never asserted in
tests).

One run, on this machine: a fake Anthropic (asyncio, raw sockets, SSE with usage) on loopback,
and a process capsule whose harness is this file's client (`--client`). The client, inside the
capsule's harness, calls the fake two ways, interleaved so a load that comes and goes falls on
both alike:
1. directly (fallback mode only: in namespace mode the jail has no way to the fake but the
   gateway);
2. through a bare TCP relay (`socat`, when installed; fallback mode only): what one more hop
   costs any proxy on this machine, the physical limit the gateway is held against;
3. through its capsule's gateway (`ANTHROPIC_BASE_URL`, with its placeholder key).
It measures time to first byte of the answer (sequential calls; median and p90), and the
throughput of 64 concurrent streams (bytes of all answers over the wall time). Meanwhile this
script samples the capsule process's resident memory.

Usage: scripts/bench/gateway.py [CALLS] [STREAM_KB]   (needs a release build: cargo build --release)
Every process it starts is stopped before it exits; all traffic stays on 127.0.0.1.
"""
import asyncio
import json
import os
import shutil
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
STREAMS = 64


def sse_answer(kb):
    """An Anthropic stream of about `kb` KiB of text deltas, usage in message_start/delta."""
    def event(name, data):
        return f"event: {name}\ndata: {json.dumps(data)}\n\n"
    parts = [event("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "bench",
        "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    delta = event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": "x" * 180}})
    parts.extend([delta] * max(1, kb * 1024 // len(delta)))
    parts.append(event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                         "usage": {"output_tokens": 100}}))
    parts.append(event("message_stop", {"type": "message_stop"}))
    return "".join(parts).encode()


def fake_provider(kb):
    """Starts the fake on a thread; answers its port. Each request: read the head and body,
    answer the SSE stream in 16 KiB writes, close."""
    big = sse_answer(kb)
    small = sse_answer(1)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"

    async def serve(reader, writer):
        try:
            data = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in data.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length) if length else b""
            answer = big if b'"max_tokens": 4096' in body else small
            writer.write(head)
            for i in range(0, len(answer), 16384):
                writer.write(answer[i:i + 16384])
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    ready = threading.Event()
    port = [0]

    def run():
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", 0, backlog=512))
        port[0] = server.sockets[0].getsockname()[1]
        ready.set()
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    ready.wait()
    return port[0]


# ---- the client, run as the capsule's harness ----

async def one_call(host, port, key, big):
    """One streamed call; answers (seconds to the first body byte, bytes of body)."""
    body = json.dumps({"model": "bench", "max_tokens": 4096 if big else 64, "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    began = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 b"anthropic-version: 2023-06-01\r\nx-api-key: " + key.encode() +
                 b"\r\nconnection: close\r\ncontent-length: " + str(len(body)).encode() +
                 b"\r\n\r\n" + body)
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")
    first = await reader.read(65536)
    ttfb = time.perf_counter() - began
    total = len(first)
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        total += len(chunk)
    writer.close()
    return ttfb, total


async def client(calls, fake_port, relay_port, out):
    gw = os.environ["ANTHROPIC_BASE_URL"].removeprefix("http://")
    gw_host, gw_port = gw.rsplit(":", 1)
    key = os.environ["ANTHROPIC_API_KEY"]
    ways = {"gateway": (gw_host, int(gw_port))}
    if fake_port:
        ways["direct"] = ("127.0.0.1", fake_port)
    if relay_port:
        ways["relay"] = ("127.0.0.1", relay_port)
    ttfb = {w: [] for w in ways}
    for _ in range(calls):
        for w, (h, p) in ways.items():
            ttfb[w].append((await one_call(h, p, key, False))[0])
    rate = {w: [] for w in ways}
    for _ in range(3):
        for w, (h, p) in ways.items():
            began = time.perf_counter()
            done = await asyncio.gather(*[one_call(h, p, key, True) for _ in range(STREAMS)])
            rate[w].append(sum(b for _, b in done) / (time.perf_counter() - began))
    with open(out, "w") as f:
        json.dump({"ttfb": ttfb, "rate": rate}, f)


# ---- the driver ----

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def children(pid):
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            found += [int(c) for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
        except OSError:
            pass
    return found


def is_capsule(pid):
    try:
        return b"MURMUR_CAPSULE_CONFIG=" in open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        return False


def rss_kib(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench(mode, tmp, calls, kb, fake_port, relay_port):
    home = os.path.join(tmp, f"home-{mode}")
    os.makedirs(home)
    out = os.path.join(tmp, f"out-{mode}.json")
    direct = fake_port if mode == "fallback" else 0
    relay = relay_port if mode == "fallback" else 0
    manifest = os.path.join(tmp, f"bench-{mode}.yaml")
    with open(manifest, "w") as f:
        f.write(f"""name: gateway-bench
version: "0.1.0"
artifacts:
  - name: local/bench
    version: "0.1.0"
    runtime: driver
    gateway: {{ endpoint: "http://127.0.0.1:{fake_port}", api_key: sk-bench, api: anthropic }}
    process:
      command: ["{sys.executable}", "{os.path.abspath(__file__)}", "--client", "{calls}", "{direct}", "{relay}", "{out}"]
inference:
  transport: process
lifecycle: {{ task_acceptance: single, after_task: exit }}
""")
    env = dict(os.environ, MURMUR_HOME=home, MURMUR_CONTAINMENT=mode,
               MURMUR_HARNESS_WRITABLE=tmp)
    proc = subprocess.Popen([MUR, "run", "--manifest", manifest, "--task", "go"], cwd=tmp, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    peak = 0
    cpu = 0.0
    try:
        capsule = None
        while proc.poll() is None:
            if capsule is None:
                capsule = next((c for c in children(proc.pid) if is_capsule(c)), None)
            if capsule:
                try:
                    peak = max(peak, rss_kib(capsule, "VmHWM:"))
                    fields = open(f"/proc/{capsule}/stat").read().rsplit(")", 1)[1].split()
                    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
                except (OSError, IndexError, ValueError):
                    pass
            time.sleep(0.05)
        if not os.path.exists(out):
            raise SystemExit(f"{mode}: the client wrote nothing: {proc.stderr.read()[-2000:]}")
        with open(out) as f:
            got = json.load(f)
        got["cpu"] = cpu
        return got, peak
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        asyncio.run(client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
        print("done")
        return
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    kb = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    if not os.path.exists(MUR):
        raise SystemExit("build first: cargo build --release")
    tmp = tempfile.mkdtemp(prefix="murmur-bench-gateway-")
    try:
        fake_port = fake_provider(kb)
        relay_port, relay = 0, None
        if shutil.which("socat"):
            relay_port = free_port()
            relay = subprocess.Popen(["socat", "-b", "65536",
                                      f"TCP-LISTEN:{relay_port},bind=127.0.0.1,fork,reuseaddr,backlog=512",
                                      f"TCP:127.0.0.1:{fake_port}"], stderr=subprocess.DEVNULL)
            time.sleep(0.3)
        print(f"{calls} sequential calls a way (1 KiB answers), then 3 rounds of {STREAMS} "
              f"concurrent streams of {kb} KiB; 2 cores, one run")
        print("| mode | way | first byte p50 / p90 (ms) | 64 streams (MB/s, best of 3) | capsule peak RSS (MiB) |")
        print("|---|---|---|---|---|")
        for mode in ["fallback", "namespaces"]:
            got, peak = bench(mode, tmp, calls, kb, fake_port, relay_port)
            for way in got["ttfb"]:
                t = [x * 1000 for x in got["ttfb"][way]]
                r = max(got["rate"][way]) / 1e6
                print(f"| {mode} | {way} | {pct(t, 0.5):.3f} / {pct(t, 0.9):.3f} | {r:.0f} | "
                      f"{peak / 1024:.1f} |")
            if "direct" in got["ttfb"]:
                added = pct(got["ttfb"]["gateway"], 0.5) - pct(got["ttfb"]["direct"], 0.5)
                ratio = max(got["rate"]["gateway"]) / max(got["rate"]["direct"])
                print(f"|  | gateway − direct | {added * 1000:+.3f} ms at the median | "
                      f"{ratio:.2f} of direct |  |")
            if "relay" in got["ttfb"]:
                added = pct(got["ttfb"]["gateway"], 0.5) - pct(got["ttfb"]["relay"], 0.5)
                ratio = max(got["rate"]["gateway"]) / max(got["rate"]["relay"])
                print(f"|  | gateway − relay | {added * 1000:+.3f} ms at the median | "
                      f"{ratio:.2f} of the relay |  |")
            print(f"|  | the capsule's CPU time over the whole run | {got['cpu']:.2f} s |  |  |")
    finally:
        if relay:
            relay.terminate()
            relay.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
