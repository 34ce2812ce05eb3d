"""A scripted batch server for tests: OpenAI's files and batches endpoints and Anthropic's
Message Batches, on top of :class:`judge_server.JudgeServer` (the online endpoints stay).

Each batched request is answered by the same script as online (``JudgeServer._scripted``), when
the batch is first polled after ``hold`` is switched off. Scripting:

- ``server.hold = True``: batches stay ``in_progress`` until it is set back to ``False``;
- ``server.batch_errors[MARKER] = message``: a request whose text carries MARKER fails in the
  batch with that message (OpenAI: a line of the error file; Anthropic: an ``errored`` result);
- ``server.expire = True``: the next batches end ``expired`` with no request answered.

``server.files`` (uploads), ``server.batches`` (created) and ``server.batched`` (request bodies
answered in batches) count what was sent; ``server.requests`` still records every answered verdict.
"""

import json
import time
from typing import Any

from judge_server import _REQUEST, JudgeServer


class BatchServer(JudgeServer):
    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(delay)
        self.reset_batches()

    def reset_batches(self) -> None:
        self.hold = False
        self.expire = False
        self.batch_errors: dict[str, str] = {}
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batched: list[dict[str, Any]] = []
        self.outputs: dict[str, bytes] = {}

    def reset(self) -> None:
        super().reset()
        self.reset_batches()

    async def _route(self, method: str, path: str, raw: bytes) -> tuple[int, dict[str, str], Any]:
        if "/batches" in path or path.endswith("/files") or "/files/" in path:
            return await self._batch_route(method, path, raw)
        return await super()._route(method, path, raw)

    async def _batch_route(self, method: str, path: str, raw: bytes) -> tuple[int, dict[str, str], Any]:
        parts = path.strip("/").split("/")
        if path.endswith("/files") and method == "POST":
            _, headers = _REQUEST.get()
            boundary = headers["content-type"].split("boundary=", 1)[1]
            content = next(p for p in raw.split(b"--" + boundary.encode()) if b'name="file"' in p)
            body = content.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
            fid = f"file-{len(self.files) + 1}"
            self.files[fid] = body
            return 200, {}, {"id": fid, "object": "file", "purpose": "batch", "bytes": len(body)}
        if "files" in parts and parts[-1] == "content":
            return 200, {"content-type": "application/jsonl"}, self.outputs[parts[-2]]
        anthropic = "messages" in parts
        if method == "POST" and parts[-1] == "batches":
            body = json.loads(raw)
            bid = f"{'msgbatch' if anthropic else 'batch'}_{len(self.batches) + 1}"
            if anthropic:
                lines = [{"custom_id": r["custom_id"], "body": r["params"]} for r in body["requests"]]
            else:
                lines = [json.loads(x) for x in self.files[body["input_file_id"]].decode().splitlines() if x.strip()]
            self.batches[bid] = {"id": bid, "anthropic": anthropic, "lines": lines, "status": "in_progress",
                                 "metadata": body.get("metadata") or {}, "created_at": int(time.time()),
                                 "expire": self.expire}
            return 200, {}, self._view(bid)
        if method == "GET" and parts[-1] == "batches":
            return 200, {}, {"data": [self._view(b) for b in reversed(self.batches)], "has_more": False}
        if method == "POST" and parts[-1] == "cancel":
            self.batches[parts[-2]]["status"] = "cancelled"
            return 200, {}, self._view(parts[-2])
        if method == "GET" and parts[-1] == "results":
            return 200, {"content-type": "application/jsonl"}, self.outputs[parts[-2]]
        if method == "GET":
            bid = parts[-1]
            if bid not in self.batches:
                return 404, {}, {"error": {"message": f"no batch {bid}"}}
            b = self.batches[bid]
            if b["status"] == "in_progress" and not self.hold:
                await self._answer(b)
            return 200, {}, self._view(bid)
        return 404, {}, {"error": {"message": f"no route {method} {path}"}}

    async def _answer(self, b: dict[str, Any]) -> None:
        out, errs = [], []
        for ln in b["lines"]:
            body, cid = ln["body"], ln["custom_id"]
            if b["anthropic"]:
                system, user, named, wire = body.get("system", ""), body["messages"][0]["content"], body["tools"][0]["name"], "anthropic"
            else:
                msgs = body["messages"]
                system = next((m["content"] for m in msgs if m["role"] == "system"), "")
                user = next(m["content"] for m in msgs if m["role"] == "user")
                named, wire = body["response_format"]["json_schema"]["name"], "openai"
            marker = next((m for m in self.batch_errors if m in user), None)
            if b["expire"]:
                err = {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
                errs.append({"custom_id": cid, "result": {"type": "expired"}} if b["anthropic"] else
                            {"custom_id": cid, "response": None, "error": err})
                continue
            if marker is not None:
                msg = self.batch_errors[marker]
                errs.append({"custom_id": cid, "result": {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": msg}}}} if b["anthropic"] else
                    {"custom_id": cid, "response": {"status_code": 400, "body": {"error": {"message": msg, "code": "invalid_request"}}},
                     "error": None})
                continue
            self.batched.append(body)
            _, _, reply = await self._scripted(wire, body, system, user, named, body.get("model", ""))
            out.append({"custom_id": cid, "result": {"type": "succeeded", "message": reply}} if b["anthropic"] else
                       {"id": f"req-{cid[:8]}", "custom_id": cid, "response": {"status_code": 200, "body": reply}, "error": None})
        enc = lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode()  # noqa: E731
        b["status"] = "expired" if b["expire"] else "completed"
        if b["anthropic"]:
            self.outputs[b["id"]] = enc(out + errs)
        else:
            self.outputs[f"out-{b['id']}"], self.outputs[f"err-{b['id']}"] = enc(out), enc(errs)
            b["output_file_id"], b["error_file_id"] = f"out-{b['id']}", (f"err-{b['id']}" if errs else None)

    def _view(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        n = len(b["lines"])
        done = b["status"] != "in_progress"
        if b["anthropic"]:
            return {"id": bid, "type": "message_batch", "processing_status": "ended" if done else "in_progress",
                    "request_counts": {"processing": 0 if done else n, "succeeded": n if done else 0,
                                       "errored": 0, "canceled": 0, "expired": 0},
                    "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(b["created_at"])),
                    "results_url": f"{self.url}/v1/messages/batches/{bid}/results" if done else None}
        return {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions", "status": b["status"],
                "metadata": b["metadata"], "created_at": b["created_at"],
                "request_counts": {"total": n, "completed": n if done else 0, "failed": 0},
                "output_file_id": b.get("output_file_id"), "error_file_id": b.get("error_file_id")}
