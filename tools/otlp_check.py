#!/usr/bin/env python3
"""Checks OTLP bodies with the official OpenTelemetry protocol classes.

Usage:
    otlp_check.py json FILE          # OTLP/JSON Lines (TracesData or MetricsData per line)
    otlp_check.py pb traces FILE     # one protobuf ExportTraceServiceRequest
    otlp_check.py pb metrics FILE    # one protobuf ExportMetricsServiceRequest
    otlp_check.py pb-canonical traces|metrics FILE
                                     # the same, and the body must be byte for byte
                                     # what the official encoder writes for it

For JSON, the OTLP rules that generic protobuf JSON does not share are checked
first, explicitly: every key is lowerCamelCase; trace and span ids are
lowercase hex of 32 and 16 characters; 64-bit integers are decimal strings;
enums are integers. Then the ids are turned into base64 (what
`google.protobuf.json_format` expects for bytes) and each line is parsed into
the official message class, refusing unknown fields.

Prints one JSON object on stdout, the decoded content in a plain form:
{"lines": N, "spans": [...], "metrics": [...]}, for the tests to compare.
Exits 1 with a message naming the file and line on the first violation.
Needs the `opentelemetry-proto` package (scripts/install-test-tools.sh).
"""

import base64
import json
import re
import sys

try:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.metrics.v1 import metrics_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2
except ImportError as e:
    sys.exit(f"otlp_check: {e}; run scripts/install-test-tools.sh to install opentelemetry-proto")

ID_LENGTHS = {"traceId": 32, "spanId": 16, "parentSpanId": 16}
INT64_KEYS = {"startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "intValue", "asInt", "count"}
ENUM_KEYS = {"kind", "code", "aggregationTemporality"}
CAMEL = re.compile(r"[a-z][a-zA-Z0-9]*")
HEX = re.compile(r"[0-9a-f]*")
DECIMAL = re.compile(r"-?[0-9]+")


class Violation(Exception):
    pass


def check_rules(node, path):
    """Checks the OTLP/JSON rules and turns hex ids into base64, in place."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            check_rules(item, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    for key in list(node):
        value = node[key]
        where = f"{path}.{key}"
        if not CAMEL.fullmatch(key):
            raise Violation(f"{where}: key is not lowerCamelCase")
        if key in ID_LENGTHS:
            n = ID_LENGTHS[key]
            if not isinstance(value, str) or len(value) != n or not HEX.fullmatch(value):
                raise Violation(f"{where}: {value!r} is not {n} lowercase hex characters")
            if value == "0" * n:
                raise Violation(f"{where}: an all-zero id is invalid")
            node[key] = base64.b64encode(bytes.fromhex(value)).decode()
        elif key in INT64_KEYS:
            if not isinstance(value, str) or not DECIMAL.fullmatch(value):
                raise Violation(f"{where}: {value!r} is a 64-bit integer, expected a decimal string")
        elif key in ENUM_KEYS:
            if not isinstance(value, int) or isinstance(value, bool):
                raise Violation(f"{where}: {value!r} is an enum, expected an integer")
        else:
            check_rules(value, where)


def any_value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value",):
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


def attrs(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def plain_traces(data):
    out = []
    for rs in data.resource_spans:
        resource = attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    {
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex() or None,
                        "name": s.name,
                        "kind": s.kind,
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "attributes": attrs(s.attributes),
                        "events": [
                            {"name": e.name, "time": e.time_unix_nano, "attributes": attrs(e.attributes)}
                            for e in s.events
                        ],
                        "status_code": s.status.code,
                        "scope": ss.scope.name,
                        "resource": resource,
                    }
                )
    return out


def plain_metrics(data):
    out = []
    for rm in data.resource_metrics:
        resource = attrs(rm.resource.attributes)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                points = getattr(m, kind).data_points
                out.append(
                    {
                        "name": m.name,
                        "unit": m.unit,
                        "description": m.description,
                        "kind": kind,
                        "points": [
                            {
                                "value": getattr(p, p.WhichOneof("value")),
                                "start": p.start_time_unix_nano,
                                "time": p.time_unix_nano,
                                "attributes": attrs(p.attributes),
                            }
                            for p in points
                        ],
                        "resource": resource,
                    }
                )
    return out


def check_json(path):
    spans, metrics, lines = [], [], 0
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text and not text.endswith("\n"):
        raise Violation(f"{path}: the last line has no newline")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            raise Violation(f"{path}:{n}: an empty line")
        lines += 1
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise Violation(f"{path}:{n}: not JSON: {e}")
        try:
            check_rules(doc, "$")
        except Violation as e:
            raise Violation(f"{path}:{n}: {e}")
        if "resourceSpans" in doc:
            msg = trace_pb2.TracesData()
        elif "resourceMetrics" in doc:
            msg = metrics_pb2.MetricsData()
        else:
            raise Violation(f"{path}:{n}: neither resourceSpans nor resourceMetrics")
        try:
            json_format.ParseDict(doc, msg, ignore_unknown_fields=False)
        except json_format.ParseError as e:
            raise Violation(f"{path}:{n}: the official classes refuse it: {e}")
        if isinstance(msg, trace_pb2.TracesData):
            spans += plain_traces(msg)
        else:
            metrics += plain_metrics(msg)
    return {"lines": lines, "spans": spans, "metrics": metrics}


def check_pb(signal, path, canonical=False):
    with open(path, "rb") as f:
        body = f.read()
    if signal == "traces":
        msg = trace_service_pb2.ExportTraceServiceRequest()
    elif signal == "metrics":
        msg = metrics_service_pb2.ExportMetricsServiceRequest()
    else:
        raise Violation(f"unknown signal {signal!r}; expected traces or metrics")
    try:
        msg.ParseFromString(body)
    except Exception as e:  # DecodeError, and anything the runtime raises on bad bytes
        raise Violation(f"{path}: not a valid {type(msg).__name__}: {e}")
    again = msg.SerializeToString()
    if again != body:
        # Field order or encoding differs from the official encoder's: valid
        # protobuf still, but a sign of a field written out of place.
        at = next((i for i, (a, b) in enumerate(zip(again, body)) if a != b), min(len(again), len(body)))
        why = f"{path}: differs from the official encoding from byte {at} ({len(body)} vs {len(again)} bytes)"
        if canonical:
            raise Violation(why)
        print(f"otlp_check: {why}", file=sys.stderr)
    if signal == "traces":
        return {"lines": 1, "spans": plain_traces(msg), "metrics": []}
    return {"lines": 1, "spans": [], "metrics": plain_metrics(msg)}


def main(argv):
    try:
        if len(argv) == 3 and argv[1] == "json":
            result = check_json(argv[2])
        elif len(argv) == 4 and argv[1] in ("pb", "pb-canonical"):
            result = check_pb(argv[2], argv[3], canonical=argv[1] == "pb-canonical")
        else:
            sys.exit(__doc__)
    except Violation as e:
        print(f"otlp_check: {e}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
