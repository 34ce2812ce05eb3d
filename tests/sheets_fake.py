"""A local fake of the Google Sheets v4 HTTP API and of Google's OAuth token endpoint (tests only).

It keeps spreadsheets in memory and answers the calls the Sheets sink makes: spreadsheet
metadata (``GET /v4/spreadsheets/ID``), ``:batchUpdate`` with ``addSheet``, ``values:batchGet``
and ``values/RANGE:append``; ``POST /token`` checks the service-account JWT's signature with the
public key of the credentials file and returns a bearer token. Every request is recorded in
``requests``; ``fail_next(n, status)`` makes the next n Sheets calls answer ``status`` (429 ...).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

TOKEN = "fake-access-token"


def _sheet_of(a1: str) -> str:
    name = a1.rsplit("!", 1)[0] if "!" in a1 else a1
    if name.startswith("'") and name.endswith("'"):
        name = name[1:-1].replace("''", "'")
    return name


class FakeSheets:
    """In-memory spreadsheets behind a local HTTP server."""

    def __init__(self) -> None:
        self.books: dict[str, dict[str, list[list[Any]]]] = {}
        self.requests: list[dict[str, Any]] = []
        self.public_key: Any = None
        self._fail: list[int] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                with fake._lock:
                    status, body, headers = fake.dispatch(method, self.path, dict(self.headers), raw)
                self._send(status, body, headers)

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> FakeSheets:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def fail_next(self, n: int, status: int = 429) -> None:
        self._fail.extend([status] * n)

    def dispatch(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> tuple[int, Any, dict[str, str]]:
        parts = urlsplit(target)
        path, query = unquote(parts.path), parse_qs(parts.query)
        body = json.loads(raw) if raw and path != "/token" else None
        self.requests.append({"method": method, "path": path, "query": query, "json": body,
                              "authorization": headers.get("Authorization") or headers.get("authorization")})
        if path == "/token":
            return self._token(raw)
        if (headers.get("Authorization") or headers.get("authorization")) != f"Bearer {TOKEN}":
            return 401, {"error": {"code": 401, "message": "no valid token", "status": "UNAUTHENTICATED"}}, {}
        if self._fail:
            status = self._fail.pop(0)
            return status, {"error": {"code": status, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}, {"Retry-After": "0"}
        prefix = "/v4/spreadsheets/"
        if not path.startswith(prefix):
            return 404, {"error": {"code": 404, "message": "not found"}}, {}
        rest = path[len(prefix):]
        if method == "POST" and rest.endswith(":batchUpdate") and "/" not in rest:
            return self._batch_update(rest[: -len(":batchUpdate")], body or {})
        if method == "GET" and rest.endswith("/values:batchGet"):
            return self._batch_get(rest[: -len("/values:batchGet")], query.get("ranges", []))
        if method == "POST" and "/values/" in rest and rest.endswith(":append"):
            sid, a1 = rest.split("/values/", 1)
            return self._append(sid, a1[: -len(":append")], body or {})
        if method == "GET" and "/" not in rest:
            return self._metadata(rest)
        return 404, {"error": {"code": 404, "message": f"unsupported {method} {path}"}}, {}

    def _token(self, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        import jwt_check

        form = parse_qs(raw.decode())
        assertion = form.get("assertion", [""])[0]
        if not jwt_check.verify(assertion, self.public_key):
            return 400, {"error": "invalid_grant"}, {}
        return 200, {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}, {}

    def _book(self, sid: str) -> dict[str, list[list[Any]]] | None:
        return self.books.get(sid)

    def _metadata(self, sid: str) -> tuple[int, Any, dict[str, str]]:
        book = self._book(sid)
        if book is None:
            return 404, {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}}, {}
        sheets = [{"properties": {"sheetId": i, "title": t, "index": i, "sheetType": "GRID",
                                  "gridProperties": {"rowCount": max(1000, len(rows)), "columnCount": 26}}}
                  for i, (t, rows) in enumerate(book.items())]
        return 200, {"spreadsheetId": sid, "properties": {"title": "results"}, "sheets": sheets}, {}

    def _batch_update(self, sid: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        book = self._book(sid)
        if book is None:
            return 404, {"error": {"code": 404, "message": "not found"}}, {}
        replies = []
        for req in body.get("requests", []):
            props = req["addSheet"]["properties"]
            if props["title"] in book:
                return 400, {"error": {"code": 400, "message": "sheet exists"}}, {}
            book[props["title"]] = []
            replies.append({"addSheet": {"properties": {**props, "sheetId": len(book) - 1}}})
        return 200, {"spreadsheetId": sid, "replies": replies}, {}

    def _batch_get(self, sid: str, ranges: list[str]) -> tuple[int, Any, dict[str, str]]:
        book = self._book(sid)
        if book is None:
            return 404, {"error": {"code": 404, "message": "not found"}}, {}
        out = []
        for r in ranges:
            rows = book.get(_sheet_of(r))
            if rows is None:
                return 400, {"error": {"code": 400, "message": f"Unable to parse range: {r}"}}, {}
            vr: dict[str, Any] = {"range": r, "majorDimension": "ROWS"}
            if rows:
                vr["values"] = [rows[0]]
            out.append(vr)
        return 200, {"spreadsheetId": sid, "valueRanges": out}, {}

    def _append(self, sid: str, a1: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        book = self._book(sid)
        rows = book.get(_sheet_of(a1)) if book is not None else None
        if rows is None:
            return 400, {"error": {"code": 400, "message": f"Unable to parse range: {a1}"}}, {}
        rows.extend(body.get("values", []))
        return 200, {"spreadsheetId": sid, "updates": {"updatedRows": len(body.get("values", []))}}, {}
