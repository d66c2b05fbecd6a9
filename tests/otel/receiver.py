#!/usr/bin/env python3
"""An OTLP/HTTP traces receiver for the tests (tests/support/otlp.rs): the collector `mur` exports
its spans to, decoding each export with the OpenTelemetry protocol's official Python bindings
(`opentelemetry-proto`, pinned in scripts/setup_test_deps.py).

    python3 tests/otel/receiver.py --out FILE [--status 200|500] [--delay-secs N]

It binds 127.0.0.1 on a port the system picks and prints `listening PORT` as its first line. Each
POST /v1/traces is counted in FILE.requests (the number of POSTs so far, the file rewritten each
time, counted on arrival, before any delay). With --status 500 every export is answered 500.
Otherwise the body, `application/x-protobuf` or OTLP/JSON `application/json` (gzip allowed), is
parsed as an ExportTraceServiceRequest (400 with a message for any other content type or a body
that does not parse; JSON by the official definitions' JSON mapping, with the hex trace and span
ids OTLP/JSON specifies) and every span is appended to FILE as one JSON line, flushed:

    {"trace_id": hex32, "span_id": hex16, "parent_span_id": hex16 or "", "name", "kind":
     "SPAN_KIND_SERVER", "start_ns", "end_ns", "status": {"code": "STATUS_CODE_ERROR", "message"},
     "attributes": {key: value}, "events": [{"name", "time_ns", "attributes"}],
     "resource": {key: value}, "scope": scope name, "headers": {lower-cased name: value}}

then answered 200 with an empty ExportTraceServiceResponse. --delay-secs sleeps before every
answer (a slow collector). It ends on SIGTERM or SIGINT.
"""
import argparse
import base64
import gzip
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from google.protobuf import json_format
from google.protobuf.message import DecodeError

PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
HEX_IDS = ("traceId", "spanId", "parentSpanId")


def otlp_json(text: str) -> ExportTraceServiceRequest:
    """OTLP/JSON as the specification defines it: protobuf's JSON mapping, except that trace and
    span ids are hex, not base64. The ids are checked as hex and turned into what the mapping
    reads; everything else is read by the official definitions as it is."""
    doc = json.loads(text)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for obj in [span] + span.get("links", []):
                    for key in HEX_IDS:
                        if obj.get(key):
                            obj[key] = base64.b64encode(bytes.fromhex(obj[key])).decode()
    return json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())


def plain(value):
    """An AnyValue as plain JSON: string, int, float, bool, list, object; bytes as hex."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def attributes(pairs) -> dict:
    return {kv.key: plain(kv.value) for kv in pairs}


def lines_of(request: ExportTraceServiceRequest, headers: dict):
    """One JSON line per span of the export."""
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield json.dumps({
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": Span.SpanKind.Name(span.kind),
                    "start_ns": span.start_time_unix_nano,
                    "end_ns": span.end_time_unix_nano,
                    "status": {"code": Status.StatusCode.Name(span.status.code),
                               "message": span.status.message},
                    "attributes": attributes(span.attributes),
                    "events": [{"name": e.name, "time_ns": e.time_unix_nano,
                                "attributes": attributes(e.attributes)} for e in span.events],
                    "resource": resource,
                    "scope": scope_spans.scope.name,
                    "headers": headers,
                }) + "\n"


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so a keep-alive exporter can reuse its connection; every answer has a length.
    protocol_version = "HTTP/1.1"
    server_version = "otlp-test-receiver"

    def log_message(self, fmt, *args):
        sys.stderr.write("receiver: " + (fmt % args) + "\n")

    def answer(self, status: int, body: bytes, content_type: str) -> None:
        if self.server.delay:
            time.sleep(self.server.delay)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def refuse(self, status: int, message: str) -> None:
        self.answer(status, (message + "\n").encode(), "text/plain; charset=utf-8")

    def body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self):
        self.refuse(405, "only POST /v1/traces is served")

    def do_POST(self):
        raw = self.body()
        self.server.count()
        if self.path.split("?")[0] != PATH:
            return self.refuse(404, f"only POST {PATH} is served, not {self.path}")
        if self.server.status == 500:
            return self.refuse(500, "this receiver was started with --status 500")
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type not in (PROTOBUF, JSON):
            return self.refuse(400, f"Content-Type must be {PROTOBUF} or {JSON}, not {content_type!r}")
        encoding = self.headers.get("Content-Encoding", "identity").strip().lower()
        try:
            if encoding == "gzip":
                raw = gzip.decompress(raw)
            elif encoding != "identity":
                return self.refuse(400, f"unsupported Content-Encoding {encoding!r}")
            if content_type == JSON:
                # OTLP/JSON, read by the official definitions' JSON mapping (hex ids and all).
                request = otlp_json(raw.decode("utf-8"))
            else:
                request = ExportTraceServiceRequest.FromString(raw)
        except (DecodeError, OSError, EOFError, ValueError, json_format.ParseError) as e:
            return self.refuse(400, f"the body is not an ExportTraceServiceRequest: {e}")
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.server.append(lines_of(request, headers))
        self.answer(200, ExportTraceServiceResponse().SerializeToString(), PROTOBUF)


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, out: str, status: int, delay: float):
        super().__init__(("127.0.0.1", 0), Handler)
        self.out_path = out
        self.status = status
        self.delay = delay
        self.lock = threading.Lock()
        self.requests = 0
        self.out = open(out, "a", encoding="utf-8")
        self.write_count()

    def write_count(self) -> None:
        tmp = f"{self.out_path}.requests.tmp"
        with open(tmp, "w") as f:
            f.write(f"{self.requests}\n")
        os.replace(tmp, f"{self.out_path}.requests")

    def count(self) -> None:
        with self.lock:
            self.requests += 1
            self.write_count()

    def append(self, lines) -> None:
        with self.lock:
            for line in lines:
                self.out.write(line)
                self.out.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON-lines file spans are appended to")
    parser.add_argument("--status", type=int, choices=(200, 500), default=200)
    parser.add_argument("--delay-secs", type=float, default=0.0)
    args = parser.parse_args()

    server = Receiver(args.out, args.status, args.delay_secs)

    def stop(signum, _frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        server.out.close()


if __name__ == "__main__":
    main()
