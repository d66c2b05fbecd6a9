#!/usr/bin/env python3
"""A fast OTLP/HTTP sink for scripts/bench/telemetry.sh: answers every POST /v1/traces 200 with an
empty ExportTraceServiceResponse (zero bytes is a valid one) without decoding it, counting
requests and bytes, so what the benchmark measures is murmur's cost of exporting, not a
collector's of parsing. Prints `listening PORT`; on SIGTERM prints `requests N bytes B`."""
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

seen = {"requests": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        seen["requests"] += 1
        seen["bytes"] += n
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    server.daemon_threads = True

    def stop(*_):
        print(f"requests {seen['requests']} bytes {seen['bytes']}", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
