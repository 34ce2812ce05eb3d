"""A scripted OpenAI-compatible chat-completions server for the real-agent tests: no key, no network.

Every conversation follows one script: while the request's messages hold no tool result, the
model asks for ``get_weather`` with ``{"city": "Paris"}``; once they hold the tool's result, it
answers :data:`FINAL`. It speaks ``POST /v1/chat/completions`` with and without ``stream`` (SSE
chunks, usage in the last one) and records every request body in ``server.requests``.

    python tests/agents/scripted_llm.py --port 0        # prints "PORT <n>" when ready
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

QUESTION = "What is the weather in Paris?"
TOOL = "get_weather"
ARGUMENTS = {"city": "Paris"}
TOOL_RESULT = "Sunny, 21C"
FINAL = "It is sunny and 21C in Paris."
MODEL = "gpt-4o-mini"


def _has_tool_result(messages: list[Any]) -> bool:
    return any(isinstance(m, dict) and m.get("role") in ("tool", "function") for m in messages)


def reply(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The chat completion for a request body: a tool call, or the final answer."""
    messages = body.get("messages") or []
    usage = {"prompt_tokens": 40 + 10 * len(messages), "completion_tokens": 12, "total_tokens": 52 + 10 * len(messages)}
    if _has_tool_result(messages) or not body.get("tools"):
        message: dict[str, Any] = {"role": "assistant", "content": FINAL}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function",
             "function": {"name": TOOL, "arguments": json.dumps(ARGUMENTS)}}]}
        finish = "tool_calls"
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or MODEL, "system_fingerprint": "fp_scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage}


def _chunks(done: dict[str, Any]) -> list[dict[str, Any]]:
    msg, base = done["choices"][0]["message"], {k: done[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    delta: dict[str, Any] = {"role": "assistant"}
    if msg.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(msg["tool_calls"])]
    else:
        delta["content"] = msg["content"]
    return [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": done["choices"][0]["finish_reason"]}]},
            {**base, "choices": [], "usage": done["usage"]}]


class ScriptedLLM:
    """The server, on 127.0.0.1, in a daemon thread."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self.send_error(400, "not JSON")
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self.send_error(404, f"only /v1/chat/completions is scripted, not {self.path}")
                    return
                outer.requests.append(body)
                done = reply(body, len(outer.requests))
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    for c in _chunks(done):
                        self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                data = json.dumps(done).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    with ScriptedLLM(args.port) as srv:
        print(f"PORT {srv.port}", flush=True)
        try:
            threading.Event().wait()  # until the process is ended
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
