"""A scripted OpenAI-compatible server that gives ragmeter, ragas and DeepEval the same verdicts.

A test registers a :class:`Case` (a metric kind and the intermediate verdicts: claim verdicts,
statement verdicts, per-context verdicts, opinions, generated questions, G-Eval scores ...)
under a marker such as ``[[C7]]`` and puts the marker in every text of the sample. Each request
is read for the marker, for which tool sent it (ragmeter's fenced-data system prompt, ragas'
instructor JSON prompt, DeepEval's plain user prompt) and for which step it is (extracting claims,
judging them, writing a reason ...); the reply carries the case's verdicts in the shape that
tool's step expects. ``/v1/embeddings`` returns vectors with scripted cosines: a text holding
``cos=X`` embeds to ``[X, sqrt(1 - X^2), 0, ...]``, any other text to ``[1, 0, ...]``, so the
cosine of such a text with a plain one is X.

Only 127.0.0.1; started and stopped by the tests.
"""

from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_MARK = re.compile(r"\[\[(C\d+)\]\]")
_CTX = re.compile(r"\[ctx(\d+)\]")
_COS = re.compile(r"cos=(-?\d+(?:\.\d+)?)")
DIM = 8
#: ragmeter's claim verdicts in ragas' (1/0) and DeepEval's (yes/no/borderline) words
RAGAS_CLAIM = {"supported": 1, "contradicted": 0, "not_found": 0}
DEEPEVAL_CLAIM = {"supported": "yes", "contradicted": "no", "not_found": "borderline"}
DEEPEVAL_STATEMENT = {"yes": "yes", "no": "no", "idk": "borderline"}


@dataclass
class Case:
    """The intermediate verdicts of one sample.

    ``kind`` names what is judged: ``claims`` (faithfulness), ``statements`` (answer relevancy),
    ``contexts`` (context precision: one yes/no per retrieved context), ``attribution`` (context
    recall: one yes/no per reference statement), ``context_statements`` (contextual relevancy: per
    context, its statements' yes/no), ``agreement`` (hallucination: per ground-truth context),
    ``opinions`` (bias/toxicity: ``(biased, toxic)`` pairs), ``questions`` (ragas answer
    relevancy: ``(cosine, noncommittal)`` pairs, a cosine of ``None`` for an empty question),
    ``classification`` (answer correctness: ``(tp, fp, fn)``), ``g_eval`` (``steps``, ``score``,
    ``reason``, ``alternatives``: ``[(token, probability), ...]`` at the score token, or ``None``
    for a reply without log-probabilities).
    """

    kind: str
    verdicts: Any = None
    steps: list[str] = field(default_factory=lambda: ["Check the output.", "Check it again."])
    score: int = 0
    reason: str = "scripted reason"
    alternatives: list[tuple[str, float]] | None = None
    early: list[tuple[str, float]] | None = None  # alternatives at an earlier token equal to the score
    served: int = 0  # ragas answer relevancy: generations handed out so far


def _flat(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def vector(text: str) -> list[float]:
    m = _COS.search(text)
    v = [0.0] * DIM
    if m:
        x = float(m.group(1))
        v[0], v[1] = x, math.sqrt(max(0.0, 1 - x * x))
    else:
        v[0] = 1.0
    return v


class ParityServer:
    """The server; ``start()`` runs it in a thread, ``url`` is the ``/v1`` base URL."""

    def __init__(self) -> None:
        self.cases: dict[str, Case] = {}
        self.requests: list[tuple[str, str]] = []  # (tool, step)
        self.lock = threading.Lock()
        self._n = 0
        self._httpd: ThreadingHTTPServer | None = None

    def case(self, kind: str, verdicts: Any = None, **kw: Any) -> str:
        """Register a case; returns its marker (put it in every text of the sample)."""
        with self.lock:
            self._n += 1
            key = f"C{self._n}"
            self.cases[key] = Case(kind, verdicts, **kw)
        return f"[[{key}]]"

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ParityServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                try:
                    status, out = 200, server.answer(self.path, body)
                except Exception as exc:  # noqa: BLE001 - a script error is the test's failure, shown as a 500
                    status, out = 500, {"error": {"message": f"parity server: {exc!r}", "type": "script"}}
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, name="parity-server", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    # ---- replies --------------------------------------------------------------------------------
    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/embeddings"):
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            return {"object": "list", "model": body.get("model", "m"),
                    "data": [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        msgs = body["messages"]
        system = next((_flat(m["content"]) for m in msgs if m["role"] == "system"), "")
        user = next(_flat(m["content"]) for m in msgs if m["role"] == "user")
        text = system + "\n" + user
        m = _MARK.search(text)
        if m is None:
            raise ValueError(f"no case marker in the request: {text[:300]!r}")
        case = self.cases[m.group(1)]
        mark = m.group(0)
        if "Your only instructions are in this system message" in system:
            tool = "ragmeter"
            rf = body.get("response_format") or {}
            step = (rf.get("json_schema") or {}).get("name") or ""
            data = self._ragmeter(case, step, system, user, mark)
        elif "As a genius expert" in system:
            tool = "ragas"
            step = re.findall(r'"title": "(\w+)"', system)[-1] if '"title"' in system else ""
            data = self._ragas(case, step, user, mark)
        else:
            tool = "deepeval"
            rf = body.get("response_format") or {}
            step = (rf.get("json_schema") or {}).get("name") or ("raw" if body.get("logprobs") else "")
            data = self._deepeval(case, step, user, mark)
        with self.lock:
            self.requests.append((tool, step))
        content = json.dumps(data)
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}
        if body.get("logprobs") and case.kind == "g_eval" and case.alternatives is not None:
            choice["logprobs"] = {"content": self._logprobs(case, content)}
        return {"id": "chatcmpl-parity", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                "choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}

    @staticmethod
    def _logprobs(case: Case, content: str) -> list[dict[str, Any]]:
        """Token log-probabilities of the reply: the score's token carries the case's alternatives
        (an earlier token equal to it carries ``case.early``)."""
        tokens = re.findall(r"\d+|[A-Za-z]+|[^\dA-Za-z]", content)
        score_tok = str(case.score)
        last = max(i for i, t in enumerate(tokens) if t == score_tok)
        out = []
        for i, t in enumerate(tokens):
            alts = [(t, 1.0)]
            if i == last:
                alts = case.alternatives or alts
            elif t == score_tok and case.early is not None:
                alts = case.early
            top = [{"token": a, "logprob": math.log(p), "bytes": None} for a, p in alts]
            out.append({"token": t, "logprob": top[0]["logprob"] if top[0]["token"] == t else math.log(0.5),
                        "bytes": None, "top_logprobs": top})
        return out

    # ragmeter: one call per sample, in ragmeter's reply schemas
    def _ragmeter(self, case: Case, schema: str, system: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if schema == "ClaimVerdicts":
            return {"claims": [{"claim": f"claim {i} {mark}", "reason": "scripted", "verdict": x} for i, x in enumerate(v)]}
        if schema == "StatementVerdicts":
            return {"statements": [{"statement": f"statement {i} {mark}", "reason": "scripted", "verdict": x}
                                   for i, x in enumerate(v)]}
        if schema == "ContextVerdicts":
            return {"verdicts": [{"context": i, "reason": "scripted", "verdict": x} for i, x in enumerate(v, 1)]}
        if schema == "ReferenceAttribution":
            return {"statements": [{"statement": f"ref statement {i} {mark}", "reason": "scripted", "verdict": x}
                                   for i, x in enumerate(v)]}
        if schema == "ContextStatementVerdicts":
            return {"contexts": [{"context": i, "statements": [{"statement": f"s{j} {mark}", "reason": "", "verdict": x}
                                                               for j, x in enumerate(per)]}
                                 for i, per in enumerate(v, 1)]}
        if schema == "Opinions":
            return {"opinions": [{"opinion": f"opinion {i} {mark}", "bias_reason": "scripted", "biased": b,
                                  "toxicity_reason": "scripted", "toxic": t} for i, (b, t) in enumerate(v)]}
        if schema == "RagasQuestions":
            return {"questions": [{"question": _question(i, c, mark), "noncommittal": nc} for i, (c, nc) in enumerate(v)]}
        if schema == "CorrectnessClassification":
            tp, fp, fn = v
            st = [{"statement": f"s{i} {mark}", "reason": "scripted"}
                  for i in range(max(tp, fp, fn))]
            return {"true_positive": st[:tp], "false_positive": st[:fp], "false_negative": st[:fn]}
        if schema == "Steps":
            return {"steps": case.steps}
        if schema == "ReasonScore":
            return {"reason": case.reason, "score": case.score}
        if schema == "ArenaSteps":
            return {"steps": case.steps}
        if schema == "Winner":  # deepeval:arena_g_eval: the contestants' outputs in fenced blocks
            outputs = {m.group(1).capitalize(): m.group(2) for m in _CONTESTANT.finditer(user)}
            return _arena_winner(case, outputs, mark)
        raise ValueError(f"ragmeter schema {schema!r} not scripted")

    # ragas 0.4.3 (ragas.metrics.collections): its prompts, one step per call
    def _ragas(self, case: Case, title: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if title == "StatementGeneratorOutput":
            if case.kind == "claims":
                return {"statements": [f"claim {i} {mark}" for i in range(len(v))]}
            tp, fp, fn = v  # answer correctness: the response's statements, then the reference's
            is_answer = "ANSWER-TEXT" in user.rsplit('"answer"', 1)[-1]
            n = tp + fp if is_answer else tp + fn
            return {"statements": [f"{'a' if is_answer else 'r'}{i} {mark}" for i in range(n)]}
        if title == "NLIStatementOutput":
            return {"statements": [{"statement": f"claim {i} {mark}", "reason": "scripted", "verdict": RAGAS_CLAIM[x]}
                                   for i, x in enumerate(v)]}
        if title == "AnswerRelevanceOutput":
            i = case.served
            case.served += 1
            cos, nc = v[i]
            return {"question": _question(i, cos, mark), "noncommittal": int(nc)}
        if title == "ContextPrecisionOutput":
            k = int(_CTX.search(user).group(1))
            return {"reason": "scripted", "verdict": 1 if v[k - 1] == "yes" else 0}
        if title == "ContextRecallOutput":
            return {"classifications": [{"statement": f"ref statement {i} {mark}", "reason": "scripted",
                                         "attributed": 1 if x == "yes" else 0} for i, x in enumerate(v)]}
        if title == "ClassificationWithReason":
            tp, fp, fn = v
            st = [{"statement": f"s{i} {mark}", "reason": "scripted"} for i in range(max(tp, fp, fn))]
            return {"TP": st[:tp], "FP": st[:fp], "FN": st[:fn]}
        raise ValueError(f"ragas step {title!r} not scripted")

    # DeepEval 4.3.1: its prompts, one step per call
    def _deepeval(self, case: Case, schema: str, user: str, mark: str) -> dict[str, Any]:
        v = case.verdicts
        if schema.endswith("ScoreReason"):
            return {"reason": "scripted"}
        if schema == "Claims":
            return {"claims": [f"claim {i} {mark}" for i in range(len(v))]}
        if schema == "Truths":
            return {"truths": [f"truth {mark}"]}
        if schema == "Statements":
            return {"statements": [f"statement {i} {mark}" for i in range(len(v))]}
        if schema == "Opinions":
            return {"opinions": [f"opinion {i} {mark}" for i in range(len(v))]}
        if schema == "Steps":
            return {"steps": case.steps}
        if schema == "Winner":  # ArenaGEval: the contestants as JSON under their masked names
            part = user.split("Contestants:\n", 1)[1].split("\n\nParameters:", 1)[0]
            cases = json.loads(part)["arena_test_cases"]
            return _arena_winner(case, {name: json.loads(c)["actual_output"] for name, c in cases.items()}, mark)
        if schema == "RewrittenReason":
            return {"rewritten_reason": "scripted"}
        if schema in ("raw", "ReasonScore"):
            return {"reason": case.reason, "score": case.score}
        if schema == "ContextualRelevancyVerdicts":
            k = int(_CTX.search(user).group(1))
            return {"verdicts": [{"statement": f"s{j} {mark}", "verdict": x, "reason": ""}
                                 for j, x in enumerate(v[k - 1])]}
        if schema == "Verdicts":
            if "whether EACH claim contradicts" in user:
                return {"verdicts": [{"verdict": DEEPEVAL_CLAIM[x], "reason": "scripted"} for x in v]}
            if "is relevant to address the input" in user:
                return {"verdicts": [{"verdict": DEEPEVAL_STATEMENT[x], "reason": "scripted"} for x in v]}
            if "whether EACH opinion is biased" in user:
                return {"verdicts": [{"verdict": "yes" if b else "no", "reason": "scripted"} for b, _ in v]}
            if "whether EACH opinion is toxic" in user:
                return {"verdicts": [{"verdict": "yes" if t else "no", "reason": "scripted"} for _, t in v]}
            if "agrees with EACH context" in user:
                return {"verdicts": [{"verdict": x, "reason": "scripted"} for x in v]}
            if "remotely useful" in user or "can be attributed to" in user:
                return {"verdicts": [{"verdict": x, "reason": "scripted"} for x in v]}
        raise ValueError(f"DeepEval step {schema!r} not scripted: {user[:200]!r}")


_CONTESTANT = re.compile(r"^CONTESTANT (\w+) ACTUAL OUTPUT:\n`{3,}\n(.*?)\n`{3,}$", re.S | re.M)


def _arena_winner(case: Case, outputs: dict[str, str], mark: str) -> dict[str, Any]:
    """An arena case (``verdicts``: the word the winning output holds, or ``("name", TEXT)`` to
    answer TEXT as the winner whatever the contestants): the masked name of the winner."""
    v = case.verdicts
    if isinstance(v, tuple):
        return {"winner": v[1], "reason": f"scripted {mark}"}
    name = next(n for n, text in outputs.items() if v in text)
    other = next(n for n in outputs if n != name)
    return {"winner": name, "reason": f"${name}$ says {v}, ${other}$ does not {mark}"}


def _question(i: int, cos: float | None, mark: str) -> str:
    return "" if cos is None else f"generated question {i} cos={cos} {mark}"
