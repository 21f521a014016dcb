"""An OTLP/HTTP trace receiver for wfhost's trace export tests.

Listens on 127.0.0.1 (a free port, written to the file given with --port-file
once it listens), takes `POST /v1/traces` with an
`ExportTraceServiceRequest` in protobuf (the real protocol definitions, from
the `opentelemetry-proto` package), answers with an
`ExportTraceServiceResponse`, and appends each span it decoded to the file
given with --out as one JSON line: trace and span ids in hex, the parent's,
name, kind, start and end (ns), attributes, and the resource's attributes.
Anything else (another path, a body that does not decode, another content
type) is answered 400 and written as an `{"error": ...}` line, so a test
sees it.
"""

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

LOCK = threading.Lock()


def value(v: common_pb2.AnyValue):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def spans(request: trace_service_pb2.ExportTraceServiceRequest):
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield {
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": s.kind,
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "attributes": attributes(s.attributes),
                    "scope": ss.scope.name,
                    "resource": resource,
                }


class Handler(BaseHTTPRequestHandler):
    out = None

    def log_message(self, *args):
        pass

    def write(self, record):
        with LOCK, open(self.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")

    def refuse(self, why):
        self.write({"error": why, "path": self.path})
        self.send_response(400)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path != "/v1/traces":
            return self.refuse("not the traces path")
        if self.headers.get("Content-Type") != "application/x-protobuf":
            return self.refuse(f"content type {self.headers.get('Content-Type')}")
        request = trace_service_pb2.ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except Exception as e:  # noqa: BLE001 - any decode failure is the test's
            return self.refuse(f"not an ExportTraceServiceRequest: {e}")
        for span in spans(request):
            self.write(span)
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    Handler.out = args.out
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.port_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
