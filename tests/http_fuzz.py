"""Malformed requests for every HTTP endpoint of ``ragmeter serve`` (no test here).

:func:`seed_store` fills a store with what the endpoints need (a run, an annotation task, a golden
dataset); :func:`probes` lists the malformed requests: bodies that are not JSON or not the expected
shape, numbers out of any range, lone surrogates, deep nesting, oversized ids, bodies over the size
limit, queries that cannot name anything. Every probe must be answered with a 4xx, never a 5xx.
Used by ``tests/test_http_fuzz.py`` (in process and against a real server) and by
``benchmarks/fuzz_http.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

#: a JSON body nested this deep overflows Python's recursive JSON parser
DEEP = 100_000
BIG_INT = "9" * 5000          # over Python's int/str conversion limit (4,300 digits)
INT_400 = "1" + "0" * 399     # a 400-digit number
SURROGATE = '"a\\ud800b"'     # a JSON string holding a lone surrogate
HUGE_23 = "1" + "0" * 22      # a 23-digit number


@dataclass
class Probe:
    """One request: ``path`` is sent as written (already percent-encoded)."""

    kind: str                 # calls, traces, label, review, get
    what: str                 # what the probe checks, for reports
    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: a well-formed request the endpoint may accept (2xx); every other probe must get a 4xx
    accept: bool = False


@dataclass
class Targets:
    """What the probes address: ids and tokens of the seeded store."""

    ingest_token: str
    run_id: str
    sample_id: str
    annotate_token: str
    review_token: str
    dataset: str
    review_sample: str
    origin: str = "http://127.0.0.1"


def seed_store(db: str) -> dict[str, Any]:
    """A run (one sample id has a ``/``), an annotation task with rater ``ana`` and a golden dataset
    ``gold`` in the store at ``db``. Returns ``run_id``, ``sample_id``, ``annotate_token``,
    ``dataset`` and ``review_sample``."""
    import ragmeter
    from ragmeter.golden.datasets import save_dataset
    from ragmeter.human.tasks import create_task, parse_scales
    from ragmeter.store import open_store

    samples = [{"id": "doc/1", "question": "Who wrote it?", "answer": "Marie wrote it.",
                "references": ["Marie Curie"], "contexts": ["Marie Curie wrote it."]}]
    samples += [{"id": f"s{i}", "question": f"q{i}?", "answer": f"a{i}", "references": [f"a{i}"],
                 "contexts": [f"c{i}"]} for i in range(4)]
    res = ragmeter.evaluate(samples, metrics=["token_f1"], db=db, name="fuzz")
    store = open_store(db)
    _, tokens = create_task(store, res.run_id, raters=["ana"], scales=parse_scales("overall"), n=None)
    save_dataset(store, "gold", [{"id": "g/1", "question": "Where?", "references": ["Here."]},
                                 {"id": "g2", "question": "When?", "references": ["Now."]}])
    return {"run_id": res.run_id, "sample_id": "doc/1", "annotate_token": tokens["ana"],
            "dataset": "gold", "review_sample": "g/1"}


def _nest(depth: int, leaf: str = "1", open_: str = "[", close: str = "]") -> str:
    return open_ * depth + leaf + close * depth


def _deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# ---- /api/v1/calls ---------------------------------------------------------------------------------
def _calls(t: Targets) -> list[Probe]:
    auth = {"Authorization": f"Bearer {t.ingest_token}", "Content-Type": "application/json"}

    def body(text: str, what: str) -> Probe:
        return Probe("calls", what, "POST", "/api/v1/calls", text.encode("utf-8", "surrogatepass"), auth)

    def call(fields: str, what: str, accept: bool = False) -> Probe:
        probe = body('{"calls": [{' + fields + "}]}", what)
        probe.accept = accept
        return probe


    out = [body("", "empty body"), body("{nope", "not JSON"), body("null", "null"), body("5", "a number"),
           body('"calls"', "a string"), body('{"calls": 5}', "calls a number"),
           body('{"calls": {"a": 1}}', "calls an object"), body('{"calls": [5]}', "a call that is a number"),
           body('{"calls": [null]}', "a null call"), body('{"calls": [[]]}', "a call that is a list"),
           body('{"calls": "x"}', "calls a string"), body('{"other": []}', "no calls key"),
           body(_nest(DEEP), "100,000 nested lists"), body(_deep_object(DEEP), "100,000 nested objects"),
           body('{"calls": [{"metadata": ' + _deep_object(500) + "}]}", "metadata nested 500 deep"),
           body('{"calls": [{"query": "q", "metadata": {"k": ' + _nest(200) + "}}]}", "metadata list nested 200 deep"),
           body('{"calls": [' + BIG_INT + "]}", "a 5,000-digit integer as a call"),
           body(BIG_INT, "a 5,000-digit integer body"),
           body('{"calls": [{"query": "q"}]}'.replace("q", "\\ud800"), "lone surrogate in a key position"),
           body('{"calls": [{"query": "q"}], "calls": 7}', "duplicate key with a wrong value"),
           body('{"calls": [{"latency_ms": NaN}]}', "NaN token"),
           body('{"calls": [{"latency_ms": Infinity}]}', "Infinity token"),
           body('{"calls": [{"latency_ms": -Infinity}]}', "-Infinity token"),
           Probe("calls", "invalid UTF-8", "POST", "/api/v1/calls", b'{"calls": [{"query": "\xff\xfe"}]}', auth),
           Probe("calls", "UTF-16 body", "POST", "/api/v1/calls", '{"calls": []}'.encode("utf-16"), auth),
           Probe("calls", "NUL bytes", "POST", "/api/v1/calls", b'{"calls": [{"query": "a\x00b"}]}', auth),
           Probe("calls", "body over the size limit", "POST", "/api/v1/calls",
                 b'{"calls": [' + b'{"query": "' + b"x" * (17 * 1024 * 1024) + b'"}]}', auth),
           Probe("calls", "10,001 calls", "POST", "/api/v1/calls",
                 ('{"calls": [' + ",".join(["{}"] * 10_001) + "]}").encode(), auth)]
    for fld in ("timestamp", "latency_ms", "cost_usd", "feedback", "input_tokens", "output_tokens"):
        for value, what in ((INT_400, "a 400-digit integer"), (INT_400 + ".5", "a 400-digit decimal"),
                            ("-" + INT_400, "a negative 400-digit integer"), ("1e400", "1e400"),
                            ("-1e400", "-1e400"), (BIG_INT, "a 5,000-digit integer"),
                            ('"' + BIG_INT + '"', "a 5,000-digit numeral text"), ("1e20", "1e20"),
                            ("-1e20", "-1e20"), ("-1", "-1"), ('"abc"', "a word"), ("[]", "a list"),
                            ("{}", "an object"), ("true", "true"), (SURROGATE, "a lone surrogate"),
                            ('"NaN"', "NaN text"), ('"inf"', "inf text"), (HUGE_23, "a 23-digit integer"),
                            ("9223372036854775808", "2**63"), ("1.7976931348623157e308", "the largest float")):
            out.append(call(f'"{fld}": {value}', f"{fld}: {what}",
                            accept=(fld, what) == ("feedback", "true")))
    out.append(call('"timestamp": "9999-12-31T23:59:59Z"', "timestamp: the last ISO second", accept=True))
    out.append(call('"latency_ms": 1e12, "cost_usd": 1e9', "the largest latency and cost", accept=True))
    out.append(call('"timestamp": ""', "timestamp: empty text (now)", accept=True))
    for value, what in (('"10000-01-01"', "year 10000"),
                        ('"0001-01-01T00:00:00Z"', "year 1"), ('"-0001-01-01"', "year -1"),
                        ('"2026-13-45T99:00:00Z"', "month 13"), ('"2026-01-01T00:00:00+25:00"', "offset +25h"),
                        ("253402300800", "epoch second of year 10000"), ("-62135596801", "epoch before year 1"),
                        ("1e15", "epoch 1e15"), ("-1e15", "epoch -1e15"),
                        ('"' + "2" * 10_000 + '"', "10,000 digits of text")):
        out.append(call(f'"timestamp": {value}', f"timestamp: {what}"))
    for fld in ("query", "answer", "model", "error", "call_id"):
        out += [call(f'"{fld}": {SURROGATE}', f"{fld}: a lone surrogate"),
                call(f'"{fld}": "\\udfff"', f"{fld}: a lone low surrogate"),
                call(f'"{fld}": {_nest(300)}', f"{fld}: nested 300 deep"),
                call(f'"{fld}": {{"a": [1, {{"b": 2}}]}}', f"{fld}: an object", accept=fld == "error"),
                call(f'"{fld}": {BIG_INT}', f"{fld}: a 5,000-digit integer"),
                call(f'"{fld}": {INT_400}', f"{fld}: a 400-digit integer")]
    out += [call('"model": "' + "m" * 5000 + '"', "model: 5,000 characters"),
            call('"call_id": "' + "c" * 5000 + '"', "call_id: 5,000 characters"),
            call('"call_id": ""', "call_id: empty (no id)", accept=True),
            call('"contexts": 5', "contexts: a number"), call('"contexts": [5]', "contexts: [5]"),
            call('"contexts": [[["x"]]]', "contexts: nested lists"),
            call(f'"contexts": [{SURROGATE}]', "contexts: a lone surrogate"),
            call(f'"contexts": [{{"text": {SURROGATE}, "id": {SURROGATE}}}]', "contexts: surrogate id and text"),
            call(f'"contexts": [{{"text": {_nest(300)}}}]', "contexts: text nested 300 deep"),
            call(f'"contexts": [{{"id": {BIG_INT}}}]', "contexts: a 5,000-digit id"),
            call('"metadata": 5', "metadata: a number"), call('"metadata": [1]', "metadata: a list"),
            call('"metadata": {"\\ud800": 1}', "metadata: a lone surrogate key"),
            call(f'"metadata": {{"k": {SURROGATE}}}', "metadata: a lone surrogate value"),
            call(f'"metadata": {{"k": {BIG_INT}}}', "metadata: a 5,000-digit integer"),
            call(f'"metadata": {{"k": {INT_400}}}', "metadata: a 400-digit integer"),
            call('"metadata": {"k": 1e400}', "metadata: 1e400"),
            call(f'"unknown_field": {_nest(400)}', "an unknown field nested 400 deep"),
            call('"\\ud800": 1', "an unknown field with a lone surrogate name"),
            call('"feedback": 7', "feedback: 7"), call('"feedback": "sideways"', "feedback: a word"),
            call('"ts": "yesterday"', "ts: a word"), call('"latency": "slow"', "latency: a word"),
            call('"cost": [1]', "cost: a list")]
    out += [Probe("calls", "wrong content type", "POST", "/api/v1/calls", b"calls=1",
                  {**auth, "Content-Type": "application/x-www-form-urlencoded"}),
            Probe("calls", "a GET", "GET", "/api/v1/calls", None, auth),
            Probe("calls", "a bearer token with control characters", "POST", "/api/v1/calls", b"[]",
                  {"Authorization": "Bearer \x7f\x01", "Content-Type": "application/json"})]
    return out


# ---- /v1/traces ------------------------------------------------------------------------------------
_TID = "5b8efff798038103d269b633813fc60c"
_SID = "eee19b7ec3c1b174"
_SID2 = "eee19b7ec3c1b175"


def _span(**over: Any) -> dict[str, Any]:
    span = {"traceId": _TID, "spanId": _SID, "name": "rag", "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000500000000",
            "attributes": [{"key": "input.value", "value": {"stringValue": "q?"}},
                           {"key": "output.value", "value": {"stringValue": "a."}}]}
    span.update(over)
    return {k: v for k, v in span.items() if v is not None}


def _export(*spans: Any, resource: Any = None) -> dict[str, Any]:
    rs: dict[str, Any] = {"scopeSpans": [{"spans": list(spans)}]}
    if resource is not None:
        rs["resource"] = resource
    return {"resourceSpans": [rs]}


def _attr(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


def _traces(t: Targets) -> list[Probe]:
    auth = {"Authorization": f"Bearer {t.ingest_token}"}
    js = {**auth, "Content-Type": "application/json"}
    pb = {**auth, "Content-Type": "application/x-protobuf"}

    def raw(text: str, what: str) -> Probe:
        return Probe("traces", what, "POST", "/v1/traces", text.encode("utf-8", "surrogatepass"), js)

    def obj(o: Any, what: str) -> Probe:
        return raw(json.dumps(o), what)

    def span_with(what: str, **over: Any) -> Probe:
        return obj(_export(_span(**over)), what)

    def attr(what: str, key: str, value: Any) -> Probe:
        return obj(_export(_span(attributes=[_attr(key, value)])), what)

    out = [raw("", "empty JSON body"), raw("{", "not JSON"), raw("[]", "a list"), raw("5", "a number"),
           raw('"x"', "a string"), raw("null", "null"),
           obj({"resourceSpans": 5}, "resourceSpans a number"), obj({"resourceSpans": "x"}, "resourceSpans a string"),
           obj({"resourceSpans": {"a": 1}}, "resourceSpans an object"), obj({"resourceSpans": [5]}, "a resource span that is a number"),
           obj({"resourceSpans": [None]}, "a null resource span"), obj({"resourceSpans": [{"scopeSpans": 5}]}, "scopeSpans a number"),
           obj({"resourceSpans": [{"scopeSpans": [5]}]}, "a scope span that is a number"),
           obj({"resourceSpans": [{"scopeSpans": [{"spans": 5}]}]}, "spans a number"),
           obj({"resourceSpans": [{"scopeSpans": [{"spans": {"a": 1}}]}]}, "spans an object"),
           obj({"resourceSpans": [{"scopeSpans": [{"spans": [5]}]}]}, "a span that is a number"),
           obj({"resourceSpans": [{"scopeSpans": [{"spans": [[]]}]}]}, "a span that is a list"),
           obj({"resourceSpans": [{"resource": 5, "scopeSpans": []}]}, "resource a number"),
           obj({"resourceSpans": [{"resource": {"attributes": 5}, "scopeSpans": []}]}, "resource attributes a number"),
           obj(_export(_span(), resource={"attributes": [5]}), "a resource attribute that is a number"),
           span_with("a span without a trace id", traceId=None),
           span_with("an empty trace id", traceId=""), span_with("a numeric trace id", traceId=5),
           span_with("a trace id that is a list", traceId=[1]), span_with("a trace id not hex nor base64", traceId="zz!"),
           span_with("a trace id of 5,000 characters", traceId="a" * 5000),
           span_with("a trace id with a lone surrogate", traceId="\ud800"),
           span_with("a span without a span id", spanId=None), span_with("a span id that is an object", spanId={"a": 1}),
           span_with("a parent id that is a number", parentSpanId=7),
           span_with("a name that is an object", name={"a": 1}), span_with("a name with a lone surrogate", name="\ud800"),
           span_with("a start time that is a word", startTimeUnixNano="abc"),
           span_with("a start time that is a list", startTimeUnixNano=[1]),
           span_with("a negative start time", startTimeUnixNano="-5"),
           span_with("a negative start time (number)", startTimeUnixNano=-5),
           span_with("a start time over 2**64", startTimeUnixNano=str(2**70)),
           span_with("a 23-digit start time", startTimeUnixNano=HUGE_23),
           span_with("a fractional start time", startTimeUnixNano=1.5),
           span_with("an end time that is a word", endTimeUnixNano="later"),
           span_with("an end time over 2**64", endTimeUnixNano=str(2**80)),
           span_with("attributes a number", attributes=5), span_with("attributes an object", attributes={"a": 1}),
           span_with("an attribute that is a number", attributes=[5]),
           span_with("an attribute without a key", attributes=[{"value": {"stringValue": "x"}}]),
           span_with("an attribute key that is a number", attributes=[{"key": 5, "value": {"stringValue": "x"}}]),
           span_with("an attribute value that is a number", attributes=[{"key": "k", "value": 5}]),
           attr("intValue a word", "k", {"intValue": "abc"}), attr("intValue a list", "k", {"intValue": [1]}),
           attr("intValue of 400 digits", "k", {"intValue": INT_400}),
           attr("intValue of 5,000 digits", "k", {"intValue": BIG_INT}),
           attr("doubleValue a word", "k", {"doubleValue": "abc"}), attr("doubleValue an object", "k", {"doubleValue": {}}),
           attr("arrayValue a number", "k", {"arrayValue": 5}), attr("arrayValue values a number", "k", {"arrayValue": {"values": 5}}),
           attr("kvlistValue a list", "k", {"kvlistValue": [1]}),
           attr("kvlistValue values a string", "k", {"kvlistValue": {"values": "x"}}),
           attr("boolValue a list", "k", {"boolValue": [1]}),
           attr("stringValue an object", "k", {"stringValue": {"a": 1}}),
           attr("stringValue a lone surrogate", "input.value", {"stringValue": "\ud800"}),
           attr("token count a word", "gen_ai.usage.input_tokens", {"stringValue": "many"}),
           attr("token count of 400 digits", "gen_ai.usage.output_tokens", {"intValue": INT_400}),
           attr("token count negative", "gen_ai.usage.input_tokens", {"intValue": "-5"}),
           attr("cost a word", "ragmeter.cost_usd", {"stringValue": "cheap"}),
           attr("cost 1e400", "ragmeter.cost_usd", {"doubleValue": "1e400"}),
           attr("contexts not JSON", "ragmeter.contexts", {"stringValue": "[not json"}),
           attr("contexts a JSON number", "ragmeter.contexts", {"stringValue": "5"}),
           attr("contexts [5]", "ragmeter.contexts", {"stringValue": "[5]"}),
           attr("contexts nested 300 deep", "ragmeter.contexts", {"stringValue": _nest(300)}),
           attr("metadata attribute nested 300 deep", "metadata", {"stringValue": _deep_object(300)}),
           attr("feedback a word", "ragmeter.feedback", {"stringValue": "sideways"}),
           attr("model an object", "gen_ai.request.model", {"kvlistValue": {"values": [_attr("a", {"stringValue": "b"})]}}),
           span_with("status a string", status="x"), span_with("status code a list", status={"code": [2]}),
           span_with("status message an object", status={"code": 2, "message": {"a": 1}}),
           obj(_export(_span(), _span(spanId=_SID2, parentSpanId=_SID, startTimeUnixNano="x")),
               "a root and a broken child in one batch"),
           raw(_nest(DEEP), "100,000 nested lists"), raw(_deep_object(DEEP), "100,000 nested objects"),
           raw(json.dumps(_export(_span()))[:-3], "a truncated body"),
           raw('{"resourceSpans": [{"scopeSpans": [{"spans": [' + BIG_INT + "]}]}]}", "a 5,000-digit integer span"),
           Probe("traces", "invalid UTF-8 JSON", "POST", "/v1/traces", b'{"resourceSpans": "\xff"}', js),
           Probe("traces", "JSON over the size limit", "POST", "/v1/traces",
                 b'{"resourceSpans": [' + b" " * (17 * 1024 * 1024) + b"]}", js)]
    deep_kv: Any = {"stringValue": "leaf"}
    for _ in range(120):
        deep_kv = {"kvlistValue": {"values": [_attr("k", deep_kv)]}}
    out.append(attr("kvlist values nested 120 deep", "k", deep_kv))
    many = [_span(spanId=f"{i:016x}", parentSpanId="ffffffffffffffff") for i in range(2, 1203)]
    out.append(obj(_export(*many), "1,201 pending spans of one trace"))
    out += [Probe("traces", "random bytes as protobuf", "POST", "/v1/traces", bytes(range(256)) * 4, pb),
            Probe("traces", "a truncated protobuf message", "POST", "/v1/traces", b"\x0a\x10\x0a\x0e", pb),
            Probe("traces", "a protobuf varint that never ends", "POST", "/v1/traces", b"\x08" + b"\xff" * 20, pb),
            Probe("traces", "JSON sent as protobuf", "POST", "/v1/traces", b'{"resourceSpans": []}', pb),
            Probe("traces", "no content type", "POST", "/v1/traces", b"\x00\x01\x02", auth),
            Probe("traces", "protobuf over the size limit", "POST", "/v1/traces", b"\x0a" * (17 * 1024 * 1024), pb)]
    out += _protobuf_probes(pb)
    return out


def _protobuf_probes(headers: dict[str, str]) -> list[Probe]:
    """Well-formed protobuf messages with wrong content: no trace id, a lone root without times,
    deep attribute values (skipped when opentelemetry-proto is not installed)."""
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:  # pragma: no cover - the monitor extra
        return []

    def message(**span: Any) -> bytes:
        req = ExportTraceServiceRequest()
        sp = req.resource_spans.add().scope_spans.add().spans.add()
        for k, v in span.items():
            if k == "attributes":
                for key, val in v:
                    a = sp.attributes.add()
                    a.key = key
                    a.value.string_value = val
            else:
                setattr(sp, k, v)
        return req.SerializeToString()

    out = [Probe("traces", "protobuf: a span without a trace id", "POST", "/v1/traces",
                 message(span_id=b"\x01" * 8, name="root", start_time_unix_nano=1, end_time_unix_nano=2), headers),
           Probe("traces", "protobuf: a span without a span id", "POST", "/v1/traces",
                 message(trace_id=b"\x02" * 16, name="root"), headers),
           Probe("traces", "protobuf: a 3-byte trace id", "POST", "/v1/traces",
                 message(trace_id=b"\x02" * 3, span_id=b"\x01" * 8), headers),
           Probe("traces", "protobuf: a latency of 584 years", "POST", "/v1/traces",
                 message(trace_id=b"\x03" * 16, span_id=b"\x01" * 8, start_time_unix_nano=0,
                         end_time_unix_nano=2**64 - 1), headers),
           Probe("traces", "protobuf: start time 2**64-1 (valid)", "POST", "/v1/traces",
                 message(trace_id=b"\x04" * 16, span_id=b"\x01" * 8, start_time_unix_nano=2**64 - 1,
                         end_time_unix_nano=2**64 - 1), headers, accept=True),
           Probe("traces", "protobuf: contexts attribute not JSON", "POST", "/v1/traces",
                 message(trace_id=b"\x05" * 16, span_id=b"\x01" * 8,
                         attributes=[("ragmeter.contexts", "{nope")]), headers),
           Probe("traces", "protobuf: token count a word", "POST", "/v1/traces",
                 message(trace_id=b"\x06" * 16, span_id=b"\x01" * 8,
                         attributes=[("gen_ai.usage.input_tokens", "many")]), headers)]
    req = ExportTraceServiceRequest()
    sp = req.resource_spans.add().scope_spans.add().spans.add()
    sp.trace_id, sp.span_id = b"\x07" * 16, b"\x01" * 8
    value = sp.attributes.add()
    value.key = "k"
    v = value.value
    for _ in range(90):
        v = v.kvlist_value.values.add().value
    v.string_value = "leaf"
    out.append(Probe("traces", "protobuf: attribute nested 90 deep", "POST", "/v1/traces",
                     req.SerializeToString(), headers))
    return out


# ---- annotation label writes ----------------------------------------------------------------------
def _labels(t: Targets) -> list[Probe]:
    headers = {"X-Annotate-Token": t.annotate_token, "Origin": t.origin, "Content-Type": "application/json"}

    def body(text: str, what: str) -> Probe:
        return Probe("label", what, "POST", "/annotate/api/labels", text.encode("utf-8", "surrogatepass"), headers)

    sid = json.dumps(t.sample_id)
    out = [body("", "empty body"), body("{", "not JSON"), body("[]", "a list"), body("5", "a number"),
           body("null", "null"), body("{}", "no fields"), body(_nest(DEEP), "100,000 nested lists"),
           body(_nest(20_000), "20,000 nested lists"), body(_deep_object(5000), "5,000 nested objects"),
           body(_deep_object(DEEP), "100,000 nested objects"),
           body('{"sample_id": ' + _nest(500) + ', "scale": "overall", "value": 3}', "sample_id nested 500 deep"),
           body('{"sample_id": ' + sid + ', "scale": "overall", "value": ' + _deep_object(500) + "}", "value nested 500 deep"),
           body('{"sample_id": ' + sid + ', "scale": ' + _nest(300) + ', "value": 3}', "scale nested 300 deep"),
           body('{"sample_id": ' + sid + ', "scale": "overall", "value": ' + BIG_INT + "}", "value: 5,000 digits"),
           body('{"sample_id": ' + sid + ', "scale": "overall", "value": ' + INT_400 + "}", "value: 400 digits"),
           body('{"sample_id": ' + sid + ', "scale": "overall", "value": 1e400}', "value: 1e400"),
           body('{"sample_id": ' + sid + ', "scale": "overall", "value": NaN}', "value: NaN"),
           body('{"sample_id": ' + sid + ', "scale": "overall", "value": ' + SURROGATE + "}", "value: a lone surrogate"),
           body('{"sample_id": ' + SURROGATE + ', "scale": "overall", "value": 3}', "sample_id: a lone surrogate"),
           body('{"sample_id": ' + sid + ', "scale": ' + SURROGATE + ', "value": 3}', "scale: a lone surrogate"),
           body('{"sample_id": "' + "x" * 100_000 + '", "scale": "overall", "value": 3}', "sample_id: 100,000 characters"),
           body('{"sample_id": ' + sid + ', "scale": "overall", "value": null}', "value: null"),
           body('{"sample_id": null, "scale": "overall", "value": 3}', "sample_id: null"),
           body('{"sample_id": ' + sid + ', "scale": "overall", "value": [3]}', "value: a list"),
           body('{"sample_id": 5, "scale": 6, "value": 3}', "ids that are numbers"),
           body('{"sample_id": ' + sid + ', "scale": "nope", "value": 3}', "an unknown scale"),
           body('{"sample_id": "nope", "scale": "overall", "value": 3}', "an unknown sample"),
           Probe("label", "invalid UTF-8", "POST", "/annotate/api/labels", b'{"sample_id": "\xff"}', headers),
           Probe("label", "a body over the size limit", "POST", "/annotate/api/labels",
                 b'{"sample_id": "' + b"x" * (2 * 1024 * 1024) + b'"}', headers),
           Probe("label", "a token of 10,000 characters", "POST", "/annotate/api/labels", b"{}",
                 {**headers, "X-Annotate-Token": "t" * 10_000}),
           Probe("label", "an Origin with a lone surrogate escape", "POST", "/annotate/api/labels", b"{}",
                 {**headers, "Origin": "http://%ED%A0%80"}),
           Probe("label", "session with a long token", "GET", "/annotate/api/session", None,
                 {"X-Annotate-Token": "t" * 10_000})]
    return out


# ---- review writes --------------------------------------------------------------------------------
def _reviews(t: Targets) -> list[Probe]:
    headers = {"X-Ragmeter-Token": t.review_token, "Content-Type": "application/json", "Origin": t.origin}
    path = f"/api/datasets/{t.dataset}/samples/{quote(t.review_sample, safe='')}/review"

    def body(text: str, what: str, where: str = path) -> Probe:
        return Probe("review", what, "POST", where, text.encode("utf-8", "surrogatepass"), headers)

    def edit(changes: str, what: str) -> Probe:
        return body('{"action": "edit", "changes": ' + changes + "}", what)

    out = [body("", "empty body"), body("{", "not JSON"), body("[]", "a list"), body("5", "a number"),
           body("null", "null"), body("{}", "no action"), body('{"action": 5}', "action a number"),
           body('{"action": ' + SURROGATE + "}", "action a lone surrogate"),
           body('{"action": ' + _nest(500) + "}", "action nested 500 deep"),
           body(_nest(DEEP), "100,000 nested lists"), body(_deep_object(DEEP), "100,000 nested objects"),
           body('{"action": "edit", "changes": {"metadata": ' + _deep_object(3000) + "}}", "metadata nested 3,000 deep"),
           body('{"action": "' + "x" * 100_000 + '"}', "action of 100,000 characters"),
           edit("[]", "changes a list"), edit('"x"', "changes a string"), edit("5", "changes a number"),
           edit('["question"]', "changes a list of names"), edit('{"question": 5}', "question a number"),
           edit('{"question": ' + _deep_object(500) + "}", "question nested 500 deep"),
           edit('{"question": ' + SURROGATE + "}", "question a lone surrogate"),
           edit('{"metadata": ' + _deep_object(500) + "}", "metadata nested 500 deep"),
           edit('{"metadata": {"k": ' + BIG_INT + "}}", "metadata a 5,000-digit integer"),
           edit('{"metadata": {"k": ' + INT_400 + "}}", "metadata a 400-digit integer"),
           edit('{"metadata": 5}', "metadata a number"), edit('{"references": "x"}', "references a string"),
           edit('{"references": [' + SURROGATE + "]}", "references a lone surrogate"),
           edit('{"relevant": "x"}', "relevant a string"), edit('{"relevant": [5]}', "relevant [5]"),
           edit('{"relevant": [["a"]]}', "relevant [[a]]"),
           edit('{"relevant": [{"source": "a.md", "start": "x", "end": 5}]}', "span start a word"),
           edit('{"relevant": [{"source": "a.md", "start": ' + INT_400 + ', "end": 5}]}', "span start 400 digits"),
           edit('{"relevant": [{"source": "a.md", "start": 1e400, "end": 5}]}', "span start 1e400"),
           edit('{"relevant": [{"source": ' + _nest(300) + ', "start": 1, "end": 5}]}', "span source nested"),
           edit('{"id": "other"}', "an id change"), edit('{"trace": 5}', "a field that cannot be edited"),
           body('{"action": "accept"}', "a sample that does not exist",
                f"/api/datasets/{t.dataset}/samples/nope/review"),
           body('{"action": "accept"}', "a dataset that does not exist", "/api/datasets/nope/samples/x/review"),
           body('{"action": "accept"}', "a dataset version with a superscript digit",
                f"/api/datasets/{t.dataset}@%C2%B2/samples/x/review"),
           body('{"action": "accept"}', "a dataset version of 23 digits",
                f"/api/datasets/{t.dataset}@{HUGE_23}/samples/x/review"),
           body('{"action": "accept"}', "a sample id with a lone surrogate escape",
                f"/api/datasets/{t.dataset}/samples/%ED%A0%80/review"),
           body('{"action": "accept"}', "a sample id with invalid UTF-8", f"/api/datasets/{t.dataset}/samples/%FF/review"),
           body('{"action": "accept"}', "a sample id with NUL", f"/api/datasets/{t.dataset}/samples/a%00b/review"),
           Probe("review", "invalid UTF-8", "POST", path, b'{"action": "\xff"}', headers),
           Probe("review", "a body over the size limit", "POST", path,
                 b'{"action": "' + b"x" * (17 * 1024 * 1024) + b'"}', headers)]
    return out


# ---- dashboard GETs -------------------------------------------------------------------------------
def _gets(t: Targets) -> list[Probe]:
    rid = t.run_id
    paths = [
        "/monitor?window=1000000d", "/monitor?window=99999999999999999999999d", "/monitor?window=1e400d",
        "/monitor?window=0.0000001s", "/monitor?window=%ED%A0%80", "/monitor?window=" + "9" * 5000 + "d",
        "/monitor?bucket=x", "/monitor?max_p95_ms=abc", "/monitor?max_p95_ms=1e400", "/monitor?max_error_rate=" + INT_400,
        "/monitor?min_metric=a%3D1e999", "/monitor?min_metric=%3D", "/monitor?min_metric=" + "a" * 5000,
        "/monitor?window=1d&bucket=minute", "/monitor?window=3650d&bucket=minute",
        "/api/v1/monitor/stats?window=1000000d", "/api/v1/monitor/stats?window=" + HUGE_23 + "s",
        "/api/v1/monitor/stats?window=1d&bucket=year", "/api/v1/monitor/stats?window=3650d&bucket=minute",
        "/api/v1/monitor/stats?by=%ED%A0%80", "/api/v1/monitor/stats?by=" + "k" * 5000,
        "/api/runs?limit=" + HUGE_23, "/api/runs?limit=-1", "/api/runs?limit=abc", "/api/runs?limit=" + BIG_INT,
        "/api/runs?limit=1e3", f"/runs/{rid}?limit={HUGE_23}", f"/runs/{rid}?offset={HUGE_23}",
        f"/runs/{rid}?offset=-1", f"/runs/{rid}?limit=0", f"/runs/{rid}?offset={BIG_INT}",
        f"/api/runs/{rid}/samples?offset={HUGE_23}", f"/api/runs/{rid}/samples?limit={HUGE_23}",
        f"/api/runs/{rid}/samples?sort=nope", f"/api/runs/{rid}/samples?q=%ED%A0%80",
        f"/api/runs/{rid}/samples?q=%FF%FE", f"/api/runs/{rid}/samples?metric=%00",
        f"/api/runs/{rid}/samples?q=" + "%25" * 3000, f"/api/runs/{rid}/samples/%ED%A0%80",
        f"/api/runs/{rid}/samples/%FF", f"/api/runs/{rid}/samples/a%00b", f"/runs/{rid}/samples/%ED%A0%80",
        "/api/runs/%ED%A0%80", "/api/runs/%FF", "/api/runs/a%00b", "/runs/%ED%A0%80", "/runs/%25",
        f"/api/compare?runs={rid},{rid}", f"/api/compare?runs={rid},nope&limit={HUGE_23}",
        f"/api/compare?runs={rid},%ED%A0%80", "/api/compare", "/api/compare?runs=" + ",".join(["x"] * 2000),
        f"/compare?runs={rid},%FF", "/compare?runs=" + "a" * 3000,
        "/api/v1/trend/token_f1?limit=" + HUGE_23, "/api/v1/trend/%ED%A0%80", "/api/v1/trend/x?name=%00",
        "/trend/token_f1?limit=" + HUGE_23, "/trend/%FF",
        "/datasets/x@%C2%B2/review", f"/datasets/{t.dataset}@%C2%B2/review", f"/datasets/{t.dataset}@{HUGE_23}/review",
        f"/datasets/{t.dataset}@{BIG_INT[:3000]}/review", f"/datasets/{t.dataset}@%ED%A0%80/review",
        "/datasets/%00/review", "/datasets/" + "d" * 3000 + "/review",
        "/api/corpora/x/documents/..%2F..%2Fetc%2Fpasswd", "/api/corpora/%ED%A0%80/documents/%FF",
        "/static/%ED%A0%80", "/static/..%2F..%2Fetc%2Fpasswd", "/" + "a" * 5000, "/%ED%A0%80",
        "/annotate?x=%FF", "/favicon.ico?%FF", "/metrics?x=%ED%A0%80",
        f"/runs/{rid}/conversations/%ED%A0%80", f"/runs/{rid}/conversations/%FF", f"/runs/{rid}/conversations/a%00b",
        f"/runs/{rid}/conversations/" + "c" * 5000, f"/runs/{rid}/conversations/..%2F..%2Fetc%2Fpasswd",
        "/runs/%ED%A0%80/conversations/x", "/runs/%FF/conversations/%FF",
        f"/runs/{rid}/traces/%ED%A0%80", f"/runs/{rid}/traces/%FF", f"/runs/{rid}/traces/a%00b",
        f"/runs/{rid}/traces/" + "t" * 5000, f"/runs/{rid}/traces/..%2F..%2Fetc%2Fpasswd",
        "/runs/%ED%A0%80/traces/x", "/runs/%FF/traces/%FF",
    ]
    fine = {"/monitor?window=0.0000001s", "/monitor?window=1d&bucket=minute", "/monitor?window=3650d&bucket=minute",
            "/api/v1/monitor/stats?window=3650d&bucket=minute", "/api/v1/monitor/stats?by=%ED%A0%80",
            f"/api/runs/{rid}/samples?q=%ED%A0%80", f"/api/runs/{rid}/samples?q=%FF%FE", "/annotate?x=%FF",
            "/favicon.ico?%FF", "/metrics?x=%ED%A0%80", "/api/v1/monitor/stats?by=" + "k" * 200}
    paths.append("/api/v1/monitor/stats?by=" + "k" * 200)
    return [Probe("get", p, "GET", p, accept=p in fine) for p in paths]


def probes(t: Targets) -> list[Probe]:
    """Every malformed request, grouped by endpoint."""
    return _calls(t) + _traces(t) + _labels(t) + _reviews(t) + _gets(t)


def review_token(client: Any, dataset: str) -> str:
    """The review page's anti-forgery token (read from the page, as its script does)."""
    page = client.get(f"/datasets/{dataset}/review")
    page.raise_for_status()
    return page.text.split('name="ragmeter-token" content="')[1].split('"')[0]


def send(client: Any, probe: Probe) -> int:
    """Send ``probe`` with an ``httpx.Client`` (or a FastAPI ``TestClient``); returns the status."""
    r = client.request(probe.method, probe.path, content=probe.body, headers=probe.headers)
    return r.status_code
