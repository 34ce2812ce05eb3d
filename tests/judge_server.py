"""A local, scripted LLM server for tests and benchmarks: no key, no network.

It speaks three wire formats -- OpenAI chat completions (``POST /v1/chat/completions``),
Anthropic messages (``POST /v1/messages``) and Gemini (``POST /v1beta/models/M:generateContent``)
-- and answers like a small rule-based judge that reads the fenced data blocks of the request:
a claim is "supported" when all its words occur in a context, a statement is relevant when it
shares a word with the question, and so on (see :func:`verdict`). Tests steer it with

- ``server.force(...)``: the next requests get a given status / headers / delay / raw reply
  (429 with Retry-After, 500, a reply slower than the client's timeout, malformed JSON; with the
  header ``transfer-encoding: chunked`` the body goes in chunks without a length);
- the marker ``GARBLE`` anywhere in the evaluated text: that request always gets malformed JSON;
  ``server.by_marker[MARKER] = Forced(...)`` scripts the answer to any request carrying MARKER;
- ``server.capacity = N``: a request arriving while N are being answered gets 429 at once (with
  ``retry-after-ms: server.capacity_retry_ms`` when set), as a provider's concurrency limit does;
  ``server.rejected`` counts them. A 200 reply carries the forced ``headers`` (e.g.
  ``x-ratelimit-remaining-requests``).

A verdict reply leaves ``delay`` seconds after its request arrived (the verdict is made while the
delay passes, so the server's own work does not lengthen it). Every request body is recorded in
``server.requests`` (with its arrival and reply times, ``at`` and
``done``, as ``time.time()``: ``GET /timeline`` lists them). Run it standalone (the benchmark does, so
its CPU is not counted as the client's)::

    python tests/judge_server.py --port 0 --delay 0.2      # prints "PORT <n>" when ready
    python tests/judge_server.py --port 0 --delay 0.2 --capacity 8   # 429 beyond 8 in flight
"""

import argparse
import asyncio
import contextvars
import json
import re
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import judge_server_deepeval
import judge_server_deepeval_conv
import judge_server_ragas

GARBLE = "GARBLE"
_BLOCK = re.compile(r"^(?P<label>[A-Z][A-Z0-9 ]*):\n(?P<fence>`{3,})\n(?P<body>.*?)\n(?P=fence)$", re.S | re.M)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"the", "a", "an", "of", "is", "are", "was", "in", "on", "to", "and", "or", "it", "its",
         "what", "which", "who", "how", "does", "do", "for", "by", "with", "as", "at", "that", "this"}


def blocks(user: str) -> dict[str, str]:
    """The fenced data blocks of a user message: ``{label: text}``."""
    return {m.group("label"): m.group("body") for m in _BLOCK.finditer(user)}


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def _numbered(b: dict[str, str], prefix: str) -> list[str]:
    out = []
    i = 1
    while f"{prefix} {i}" in b:
        out.append(b[f"{prefix} {i}"])
        i += 1
    return out


#: the parts of a joint request (ragmeter.metrics.judge.joint) and their own reply schemas
JOINT_PARTS = {"faithfulness": "ClaimVerdicts", "context_recall": "ReferenceAttribution",
               "answer_relevancy": "StatementVerdicts"}


def verdict(schema: str, system: str, user: str) -> dict[str, Any]:
    """The rule-based judge's reply for a reply schema name."""
    if schema.startswith("Joint"):  # each task's part: the reply its own request would get
        return {n: verdict(s, system, user) for n, s in JOINT_PARTS.items()
                if f'(its reply goes under the key "{n}")' in system}
    b = blocks(user)
    ctx_words = set().union(*(words(c) for c in _numbered(b, "CONTEXT"))) if "CONTEXT 1" in b else set()
    answer = b.get("ANSWER", b.get("PREDICTION", b.get("GENERATED", "")))
    ref = b.get("REFERENCE", b.get("EXPECTED", ""))
    q = b.get("QUESTION", "")
    if schema == "ClaimVerdicts":
        claims = []
        for s in sentences(answer):
            if "CONTRA" in s:
                v = "contradicted"
            else:
                v = "supported" if words(s) <= ctx_words else "not_found"
            claims.append({"claim": s, "reason": f"rule: {v}", "verdict": v})
        return {"claims": claims}
    if schema == "StatementVerdicts":
        qw = words(q)
        return {"statements": [{"statement": s, "reason": "shares words" if words(s) & qw else "off topic",
                                "verdict": "yes" if words(s) & qw else "no"} for s in sentences(answer)]}
    if schema == "GeneratedQuestions":
        n = int(re.search(r"Write (\d+) different", system).group(1))
        first = sentences(answer)[0] if answer.strip() else "nothing"
        return {"questions": [f"{q or first}" if i == 0 else f"What is said in: {first}" for i in range(n)],
                "reason": "rule", "noncommittal": "don't know" in answer.lower()}
    if schema == "ContextVerdicts":
        target = words(ref or answer or q)
        return {"verdicts": [{"context": i, "reason": "rule",
                              "verdict": "yes" if words(c) & target else "no"}
                             for i, c in enumerate(_numbered(b, "CONTEXT"), 1)]}
    if schema == "ReferenceAttribution":
        return {"statements": [{"statement": s, "reason": "rule",
                                "verdict": "yes" if words(s) <= ctx_words else "no"} for s in sentences(ref)]}
    if schema == "CorrectnessClassification":
        aw, rw = words(answer), words(ref)
        tp = [{"statement": s, "reason": "in reference"} for s in sentences(answer) if words(s) <= rw]
        fp = [{"statement": s, "reason": "not in reference"} for s in sentences(answer) if not words(s) <= rw]
        fn = [{"statement": s, "reason": "missing"} for s in sentences(ref) if not words(s) <= aw]
        return {"true_positive": tp, "false_positive": fp, "false_negative": fn}
    if schema == "Opinions":
        ops = [s for s in sentences(answer) if "i think" in s.lower() or "should" in s.lower()]
        return {"opinions": [{"opinion": s, "bias_reason": "rule", "biased": "always" in s.lower(),
                              "toxicity_reason": "rule", "toxic": "stupid" in s.lower()} for s in ops]}
    if schema == "MatchingResult":
        ok = bool(words(ref)) and words(ref) <= words(answer)
        return {"reasoning": "reference words all present" if ok else "reference words missing", "is_matching": ok}
    if schema == "GradedCorrectness":
        rw = words(ref)
        frac = len(rw & words(answer)) / len(rw) if rw else 0.0
        return {"reasoning": "word overlap", "score": round(int(frac * 5 + 1e-9) / 5, 1)}
    if schema == "RubricVerdict":
        section = system.split("dimensions:", 1)[1].split("For each dimension", 1)[0]
        names = [ln[2:].split(":", 1)[0].strip() for ln in section.splitlines() if ln.startswith("- ")]
        return {"dimensions": [{"name": n, "reasoning": f"{n} looks fine", "suggestions": [f"improve {n}"],
                                "score": 0.8} for n in names]}
    if schema == "RagasQuestions":
        n = int(re.search(r"Write (\d+) questions", system).group(1))
        first = sentences(answer)[0] if answer.strip() else "nothing"
        noncommittal = "don't know" in answer.lower()
        return {"questions": [{"question": f"{q or first}" if i == 0 else f"What is said in: {first}",
                               "noncommittal": noncommittal} for i in range(n)]}
    if schema == "ContextStatementVerdicts":
        qw = words(q)
        return {"contexts": [{"context": i, "statements": [
            {"statement": s, "reason": "" if words(s) & qw else "off topic",
             "verdict": "yes" if words(s) & qw else "no"} for s in (sentences(c) or [c])]}
            for i, c in enumerate(_numbered(b, "CONTEXT"), 1)]}
    if schema == "Steps":
        return {"steps": ["Check that the Actual Output answers the Input.",
                          "Check that the Actual Output is accurate and concise."]}
    if schema == "ReasonScore":
        qw, aw = words(b.get("INPUT", "")), words(b.get("ACTUAL OUTPUT", ""))
        share = len(qw & aw) / len(qw) if qw else 0.0
        if "STRICTLY EITHER 1" in system:
            return {"reason": "shares the input's words" if share >= 0.5 else "misses the input's words",
                    "score": int(share >= 0.5)}
        low, high = (int(x) for x in re.search(r"an integer between (\d+) and (\d+)", system).groups())
        return {"reason": f"{len(qw & aw)} input word(s) found in the output", "score": round(low + share * (high - low))}
    if schema == "RelevanceLabels":
        qw = words(q)
        return {"labels": [{"chunk": i, "reason": "rule", "grade": min(3, len(words(c) & qw))}
                           for i, c in enumerate(_numbered(b, "CHUNK"), 1)]}
    if schema == "TrajectoryVerdict":  # one fifth per tool call, a fifth off per failed call
        steps = b.get("AGENT TRAJECTORY", "")
        calls = len(re.findall(r"^\d+\. ", steps, re.M))
        failed = len(re.findall(r"^ +error: ", steps, re.M))
        return {"reasoning": f"{calls} call(s), {failed} failed", "score": max(0.0, min(calls, 5) - failed) / 5}
    if schema in CONVERSATION_SCHEMAS:
        return conversation_reply(schema, b)
    if schema in judge_server_deepeval_conv.SCHEMAS:
        return judge_server_deepeval_conv.reply(schema, b)
    if schema in judge_server_deepeval.SCHEMAS:
        return judge_server_deepeval.reply(schema, system, b, words, sentences, _numbered)
    if schema in judge_server_ragas.SCHEMAS:
        return judge_server_ragas.reply(schema, system, b, words, sentences, _numbered)
    if schema in ("GoldenItem", "SupportVerdict", "SpanAnswer"):
        return golden_reply(schema, system, b)
    if schema in ("ScoreModelOutput", "LabelModelOutput"):
        return grader_reply(schema, system, user)
    if schema in ("PairwiseVerdict", "Winner", "ArenaSteps"):  # ragmeter arena: the longer answer wins
        return pairwise_reply(schema, b)
    if schema == "RubricRewrite":  # ragmeter align --rewrite-rubric: the rubric, with one rule per disagreement
        n = len(_numbered(b, "DISAGREEMENT"))
        return {"rubric": b.get("RUBRIC", "").split("\n\n")[0]
                + f"\n\nScore as people did on the {n} cases the judge got wrong."}
    raise ValueError(f"scripted judge: unknown schema {schema!r}")


def pairwise_reply(schema: str, b: dict[str, str]) -> dict[str, Any]:
    """A pairwise judge that prefers the longer answer (in characters; equal lengths: a tie, and
    DeepEval's ArenaGEval, which has no tie, names the first contestant)."""
    if schema == "ArenaSteps":
        return {"steps": ["Compare how fully each contestant's Actual Output answers the Input.",
                          "Prefer the more complete Actual Output."]}
    if schema == "PairwiseVerdict":
        one, two = len(b.get("ANSWER 1", "")), len(b.get("ANSWER 2", ""))
        return {"reason": f"answer lengths {one} and {two}", "winner": "1" if one > two else "2" if two > one else "tie"}
    alice, bob = len(b.get("CONTESTANT ALICE ACTUAL OUTPUT", "")), len(b.get("CONTESTANT BOB ACTUAL OUTPUT", ""))
    return {"winner": "Bob" if bob > alice else "Alice",
            "reason": f"$Alice$ has {alice} characters, $Bob$ {bob}"}


CONVERSATION_SCHEMAS = ("RetentionVerdict", "RoleVerdicts", "TurnRelevanceVerdict", "CompletenessVerdicts",
                        "TopicVerdicts", "SimulatedUserTurn")
#: an assistant turn with one of these words is out of character (role adherence)
OUT_OF_ROLE = ("pirate", "crypto", "lol", "no rules", "financial adviser")
_TURN_LINE = re.compile(r"^Turn (\d+) \((user|assistant)\): (.*)$", re.M)


def _turn_lines(text: str) -> list[tuple[int, str, str]]:
    return [(int(n), role, body) for n, role, body in _TURN_LINE.findall(text)]


def conversation_reply(schema: str, b: dict[str, str]) -> dict[str, Any]:
    """The scripted judge of the conversation metrics and the simulated user:
    - knowledge retention: an assistant message asking a question ("?") forgot what it was told;
    - role adherence: assistant turns with a word of :data:`OUT_OF_ROLE` are out of character;
    - turn relevancy: the last assistant turn shares a word with the last user turn;
    - completeness: one intention per user turn, met when the next assistant turn shares a word
      with it and asks nothing back;
    - topic adherence: one topic per user turn, answered unless the reply says "cannot", on a
      reference topic unless the user asks about shares, capitals or homework;
    - simulated user: first the goal, then follow-ups; the goal is reached when the last
      assistant turn says DONE."""
    conv = _turn_lines(b.get("CONVERSATION", b.get("CONVERSATION WINDOW", b.get("CONVERSATION SO FAR", ""))))
    if schema == "RetentionVerdict":
        forgot = "?" in b.get("ASSISTANT MESSAGE", "")
        return {"reason": "asks again" if forgot else "consistent", "verdict": "yes" if forgot else "no"}
    if schema == "RoleVerdicts":
        return {"verdicts": [{"turn": n, "reason": "out of role"} for n, role, body in conv
                             if role == "assistant" and any(w in body.lower() for w in OUT_OF_ROLE)]}
    if schema == "TurnRelevanceVerdict":
        last_user = next((body for _, role, body in reversed(conv) if role == "user"), "")
        last = conv[-1][2] if conv else ""
        ok = bool(words(last) & words(last_user))
        return {"reason": "shares words" if ok else "off topic", "verdict": "yes" if ok else "no"}
    if schema == "CompletenessVerdicts":
        out = []
        for k, (_, role, body) in enumerate(conv):
            if role != "user":
                continue
            reply = next((x[2] for x in conv[k + 1:] if x[1] == "assistant"), "")
            ok = bool(words(reply) & words(body)) and "?" not in reply
            out.append({"intention": body, "reason": "answered" if ok else "not answered", "verdict": "yes" if ok else "no"})
        return {"intentions": out}
    if schema == "TopicVerdicts":
        out = []
        for k, (_, role, body) in enumerate(conv):
            if role != "user":
                continue
            reply = next((x[2] for x in conv[k + 1:] if x[1] == "assistant"), "")
            out.append({"topic": body, "answered": bool(reply) and "cannot" not in reply.lower(),
                        "on_reference_topic": not any(w in body.lower() for w in ("shares", "capital", "homework")),
                        "reason": "rule"})
        return {"topics": out}
    if schema == "SimulatedUserTurn":
        goal = b.get("GOAL", "")
        users = [body for _, role, body in conv if role == "user"]
        last = conv[-1][2] if conv and conv[-1][1] == "assistant" else ""
        msg = goal if not users else f"Follow-up {len(users)}: tell me more about {goal}"
        return {"message": msg, "goal_reached": "DONE" in last}
    raise ValueError(schema)


def target_reply(messages: list[dict[str, Any]]) -> str:
    """What the scripted server answers as a system under test (a chat without a verdict schema
    that is not a pre-flight ping): it repeats the last user message."""
    last = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
    return f"Here is what I know about that: {last}"


def grader_reply(schema: str, system: str, user: str) -> dict[str, Any]:
    """An OpenAI Evals model grader's reply (``{"steps", "result"}``). With lines ``Reference
    answer: ...`` and ``Model answer: ...`` in the prompt, the share of the reference's words in
    the model's answer decides: the score is that share of the range, the label the first one when
    every word is there, else the last. Otherwise ``SCORE=x`` in the prompt is the score (default:
    the top of the range) and the label is the first one named in the prompt (default: the last)."""
    ref = re.search(r"Reference(?: answer)?:[ \t]*(.*)", user)
    ans = re.search(r"Model(?: answer)?:[ \t]*(.*)", user)
    share = None
    if ref and ans:
        rw = words(ref.group(1))
        share = len(rw & words(ans.group(1))) / len(rw) if rw else 0.0
    steps = [{"description": "compare the answer with the reference", "conclusion": f"overlap {share}"}]
    if schema == "ScoreModelOutput":
        m = re.search(r"a number from (-?[\d.]+) to (-?[\d.]+)", system)
        lo, hi = (float(m.group(1)), float(m.group(2))) if m else (0.0, 1.0)
        forced = re.search(r"SCORE=(-?[\d.]+)", user)
        result = float(forced.group(1)) if forced else hi if share is None else lo + (hi - lo) * share
        return {"steps": steps, "result": result}
    m = re.search(r"exactly one of these labels: (\[.*?\]);", system)
    labels = json.loads(m.group(1)) if m else ["pass", "fail"]
    if share is not None:
        label = labels[0] if share == 1 else labels[-1]
    else:
        uw = set(re.findall(r"[a-z0-9_]+", user.lower()))
        label = next((lab for lab in labels if lab.lower() in uw), labels[-1])
    return {"steps": steps, "result": label}


#: what the scripted generator does with a passage, by a stable hash of its text (0-9): the
#: deliberately bad replies each golden-dataset filter must catch.
GOLDEN_FAULTS = {0: "evidence", 1: "near_duplicate", 2: "leakage", 3: "answer_in_span",
                 4: "judge_support", 5: "answerability"}


def golden_fault(passage: str) -> str | None:
    import hashlib

    return GOLDEN_FAULTS.get(int(hashlib.sha256(passage.encode()).hexdigest(), 16) % 10)


def _golden_sentence(passage: str, nth: int = 0) -> str:
    good = [s for s in sentences(passage) if len(s) >= 30 and not s.startswith("#")]
    if good:
        return good[nth % len(good)]
    return passage.strip().splitlines()[-1]


def golden_reply(schema: str, system: str, b: dict[str, str]) -> dict[str, Any]:
    """Replies for golden-dataset generation (GoldenItem) and its judge checks."""
    if schema == "SupportVerdict":
        ok = words(b["ANSWER"]) <= words(b["EVIDENCE"])
        return {"reason": "answer words all in the evidence" if ok else "answer adds words", "supported": ok}
    if schema == "SpanAnswer":
        qw = words(b["QUESTION"]) - {"handbook", "say", "said", "about", "tell", "me"}
        ok = bool(qw) and len(qw & words(b["EVIDENCE"])) >= len(qw) / 2
        return {"reason": "rule", "answerable": ok, "answer": _golden_sentence(b["EVIDENCE"]) if ok else ""}
    passages = _numbered(b, "PASSAGE")
    m = re.search(r"fact number (\d+)", system)
    first = _golden_sentence(passages[0], int(m.group(1)) - 1 if m else 0)
    lead = " ".join(first.split()[:5]).rstrip(".,;:")
    if "does NOT answer" in system:
        return {"question": f"What is the phone number of the {lead.split()[-1]} office on Mars?",
                "answer": "The documents do not contain the answer to this question.", "evidence": [],
                "alternative_answers": [], "negative_answers": ["Call 555-0100."]}
    evidence = [first] + ([_golden_sentence(p) for p in passages[1:]] if "at least two" in system else [])
    item = {"question": f"What does the handbook say about '{lead}'?", "answer": first,
            "evidence": evidence, "alternative_answers": [first.lower()],
            "negative_answers": ["Nothing; it is not mentioned."]}
    fault = golden_fault(passages[0])
    if fault == "evidence":
        item["evidence"] = ["The ferry also carries spaceships to the moon every Friday."]
    elif fault == "near_duplicate":
        item["question"] = "What does the handbook say about tickets and fares?"
    elif fault == "leakage":
        item["question"] = " ".join(first.split()[:12]).rstrip(".") + "?"
    elif fault == "answer_in_span":
        item["answer"] = "Purple elephants dance on Tuesdays near the harbour lighthouse."
    elif fault == "judge_support":
        item["answer"] = first + " Swimming pool."
    elif fault == "answerability":
        item["question"] = "Why do violins sound warmer than trumpets?"
    return item


@dataclass
class Forced:
    """A scripted answer for the next request: an HTTP status with headers, a delay, raw text."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    text: str | None = None
    message: str | None = None
    #: send ``text`` as the whole body with this content type (e.g. a proxy's HTML page)
    content_type: str | None = None
    #: close the connection without answering (a dropped / reset connection)
    drop: bool = False
    #: merged into a 200 reply's ``usage`` (e.g. ``{"prompt_tokens_details": {"cached_tokens": 1024}}``,
    #: ``{"cache_read_input_tokens": 2048}``): a scripted prompt-cache hit
    usage: dict[str, Any] | None = None


#: the path and headers (lower-cased names) of the request a connection's task is answering
_REQUEST: contextvars.ContextVar[tuple[str, dict[str, str]]] = contextvars.ContextVar(
    "judge_server_request", default=("", {}))


class _Drop(Exception):
    """Raised inside a handler: close the connection without a reply."""


def _schema_name(system: str, named: str | None) -> str:
    if named:
        return named
    m = re.search(r'"title":\s*"(\w+)"', system)
    if not m:
        raise ValueError("scripted judge: cannot tell which reply schema is wanted")
    return m.group(1)


def _tokens(*texts: str) -> int:
    return max(1, sum(len(t) for t in texts) // 4)


class JudgeServer:
    """The scripted server; ``start()`` runs it in a thread on 127.0.0.1 (``url`` tells where).

    A small asyncio HTTP/1.1 server (keep-alive, Content-Length or chunked bodies): it costs the
    benchmark little CPU, so what is measured is the client.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.forced: deque[Forced] = deque()
        self.requests: list[dict[str, Any]] = []
        #: the bodies of the verdict requests answered so far, in the order their replies were sent
        self.answered: list[dict[str, Any]] = []
        #: pre-flight requests (plain prompts without a verdict schema, model look-ups), kept
        #: apart from ``requests``; ``force_ping`` scripts their answers
        self.pings: list[dict[str, Any]] = []
        #: chats answered as a system under test (``ragmeter simulate``'s target)
        self.chats: list[dict[str, Any]] = []
        self.ping_forced: deque[Forced] = deque()
        #: ``{marker: answer}``: a request whose evaluated text contains the marker always gets
        #: that answer (as ``GARBLE`` gets malformed JSON), whatever order the requests arrive in
        self.by_marker: dict[str, Forced] = {}
        self.inflight = 0
        self.max_inflight = 0
        #: requests answered at once before the server says 429 (``None``: no limit)
        self.capacity: int | None = None
        self.capacity_retry_ms: float | None = None
        self.rejected = 0
        #: the Authorization headers the server received (which key the clients sent)
        self.authorizations: set[str | None] = set()
        self.lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.port: int | None = None

    # ---- control --------------------------------------------------------------------------------
    def force(self, *items: Forced) -> None:
        with self.lock:
            self.forced.extend(items)

    def force_ping(self, *items: Forced) -> None:
        with self.lock:
            self.ping_forced.extend(items)

    def reset(self) -> None:
        with self.lock:
            self.forced.clear()
            self.requests.clear()
            self.answered.clear()
            self.pings.clear()
            self.chats.clear()
            self.ping_forced.clear()
            self.by_marker.clear()
            self.max_inflight = 0
            self.capacity = None
            self.capacity_retry_ms = None
            self.rejected = 0
            self.authorizations.clear()

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until no request is being handled (e.g. slow replies a client gave up on), then
        forget the in-flight peak."""
        deadline = time.monotonic() + timeout
        while self.inflight and time.monotonic() < deadline:
            time.sleep(0.02)
        with self.lock:
            self.max_inflight = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def n_requests(self) -> int:
        return len(self.requests)

    def start(self, port: int = 0) -> "JudgeServer":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(2048)
        self.port = sock.getsockname()[1]
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            self._server = loop.run_until_complete(asyncio.start_server(self._connection, sock=sock))
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="judge-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("judge server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        loop = self._loop

        async def shutdown() -> None:
            self._server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop = None

    # ---- HTTP -----------------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                self.authorizations.add(headers.get("authorization"))
                _REQUEST.set((target.split("?", 1)[0], headers))
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while True:
                        size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
                        chunk = await reader.readexactly(size + 2)
                        if size == 0:
                            break
                        body += chunk[:-2]
                else:
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
                try:
                    status, extra, payload = await self._route(method, target.split("?", 1)[0], body)
                except _Drop:
                    writer.transport.abort()
                    return
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                ctype = extra.pop("content-type", "application/json")
                # a forced ``transfer-encoding: chunked`` sends the body in 64 KB chunks, no length
                chunked = extra.get("transfer-encoding", "").lower() == "chunked"
                out = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}",
                       f"content-type: {ctype}"] + ([] if chunked else [f"content-length: {len(data)}"])
                out += [f"{k}: {v}" for k, v in extra.items()]
                if chunked:
                    data = b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + 65536]), data[i:i + 65536])
                                    for i in range(0, len(data), 65536)) + b"0\r\n\r\n"
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _route(self, method: str, path: str, raw: bytes) -> tuple[int, dict[str, str], Any]:
        if method == "GET" and path == "/stats":
            return 200, {}, {"requests": len(self.requests), "rejected": self.rejected,
                             "max_inflight": self.max_inflight}
        if method == "GET" and path == "/timeline":  # when each request arrived and was answered
            with self.lock:
                return 200, {}, {"requests": [[r.get("at"), r.get("done")] for r in self.requests],
                                 "pings": [p.get("at") for p in self.pings]}
        if method == "GET" and "/models/" in path:  # Gemini model look-up (pre-flight)
            model = path.rsplit("/", 1)[-1]
            return await self._ping("google", {"model": model}, {"name": f"models/{model}"})
        body = json.loads(raw) if raw else {}
        if path == "/reset":
            self.reset()
            return 200, {}, {"ok": True}
        if path == "/force":
            self.force(*(Forced(**x) for x in body))
            return 200, {}, {"ok": True}
        if path.endswith("/chat/completions"):
            msgs = body["messages"]
            system = next((m["content"] for m in msgs if m["role"] == "system"), "")
            user = next(m["content"] for m in msgs if m["role"] == "user")
            rf = body.get("response_format") or {}
            named = (rf.get("json_schema") or {}).get("name") if rf.get("type") == "json_schema" else None
            return await self._scripted("openai", body, system, user, named, body.get("model", ""))
        if path.endswith("/messages"):
            system = body.get("system", "")
            if isinstance(system, list):
                system = "".join(p.get("text", "") for p in system)
            first = body["messages"][0]["content"]
            user = first if isinstance(first, str) else "".join(p.get("text", "") for p in first)
            named = body["tools"][0]["name"] if body.get("tools") else None
            return await self._scripted("anthropic", body, system, user, named, body.get("model", ""))
        if ":generateContent" in path:
            si = body.get("systemInstruction") or body.get("system_instruction") or {}
            system = "".join(p.get("text", "") for p in si.get("parts", []))
            user = "".join(p.get("text", "") for p in body["contents"][0]["parts"])
            gen = body.get("generationConfig") or body.get("generation_config") or {}
            schema = gen.get("responseJsonSchema") or gen.get("response_json_schema") or {}
            model = path.rsplit("/", 1)[-1].split(":")[0]
            return await self._scripted("google", body, system, user, schema.get("title"), model)
        return 404, {}, {"error": {"message": f"no route {method} {path}"}}

    # ---- behaviour ------------------------------------------------------------------------------
    def _next(self, user: str) -> Forced:
        with self.lock:
            forced = self.forced.popleft() if self.forced else None
        if forced is not None:
            return forced
        for marker, answer in self.by_marker.items():
            if marker in user:
                return answer
        if GARBLE in user:
            return Forced(text='{"claims": [ this is not json')
        return Forced(delay=self.delay)

    async def _ping(self, wire: str, body: dict[str, Any], ok: Any) -> tuple[int, dict[str, str], Any]:
        with self.lock:
            self.pings.append({"wire": wire, "body": body, "at": time.time()})
            f = self.ping_forced.popleft() if self.ping_forced else None
        if f is None:
            return 200, {}, ok
        if f.delay:
            await asyncio.sleep(f.delay)
        if f.drop:
            raise _Drop
        if f.content_type is not None:
            return f.status, {**f.headers, "content-type": f.content_type}, (f.text or "").encode()
        msg = f.message or f"scripted {f.status}"
        return f.status, f.headers, {"error": {"message": msg, "type": "scripted", "code": f.status}}

    async def _scripted(self, wire: str, body: dict[str, Any], system: str, user: str,
                        named: str | None, model: str) -> tuple[int, dict[str, str], Any]:
        try:
            _schema_name(system, named)
        except ValueError:  # no verdict schema: a pre-flight ping, or a chat with a system under test
            msgs = body.get("messages") or []
            if wire == "openai" and not (len(msgs) == 1 and body.get("max_tokens") == 1):
                with self.lock:
                    self.chats.append(body)
                return 200, {}, _render(wire, None, target_reply(msgs), system, user, model, body)
            return await self._ping(wire, body, _render(wire, None, "ok", system, user, model))
        with self.lock:
            path, headers = _REQUEST.get()
            entry = {"wire": wire, "body": body, "path": path, "headers": headers, "at": time.time()}
            self.requests.append(entry)
            full = self.capacity is not None and self.inflight >= self.capacity
            if full:
                self.rejected += 1
            else:
                self.inflight += 1
                self.max_inflight = max(self.max_inflight, self.inflight)
        if full:
            extra = {"retry-after-ms": f"{self.capacity_retry_ms:g}"} if self.capacity_retry_ms is not None else {}
            return 429, extra, {"error": {"message": "scripted: too many requests in flight",
                                          "type": "rate_limit", "code": 429}}
        arrived = time.monotonic()
        ready: dict[str, Any] | None = None
        try:
            f = self._next(user)
            if f.status == 200 and f.text is None and f.content_type is None and not f.drop:
                # the verdict is made while the delay passes: a reply leaves ``delay`` seconds after its
                # request arrived, not ``delay`` plus the time this process takes to write it
                data = verdict(_schema_name(system, named), system, user)
                ready = _render(wire, data, json.dumps(data), system, user, model, body)
                if f.usage and isinstance(ready.get("usage"), dict):
                    ready["usage"].update(f.usage)
            if f.delay:
                await asyncio.sleep(max(0.0, f.delay - (time.monotonic() - arrived)))
        finally:
            with self.lock:
                self.inflight -= 1
                entry["done"] = time.time()
        if ready is not None:
            with self.lock:
                self.answered.append({"wire": wire, "body": body})
            return 200, dict(f.headers), ready
        if f.drop:
            raise _Drop
        if f.content_type is not None:
            return f.status, {**f.headers, "content-type": f.content_type}, (f.text or "").encode()
        if f.status != 200:
            msg = f.message or f"scripted {f.status}"
            return f.status, f.headers, {"error": {"message": msg, "type": "scripted", "code": f.status}}
        return 200, dict(f.headers), _render(wire, None, f.text or "", system, user, model, body)


def token_logprobs(text: str, top: int) -> list[dict[str, Any]]:
    """Scripted ``logprobs.content`` for a reply: one token per run of digits, letters or other
    characters; a number token n gets n - 1 (n + 1 for 0) as the alternative (70% / 30%)."""
    import math

    out = []
    for tok in re.findall(r"\d+|[A-Za-z]+|[^\dA-Za-z]", text):
        alts = [(tok, 0.0)]
        if tok.isdecimal():
            v = int(tok)
            alts = [(tok, math.log(0.7)), (str(v - 1 if v else 1), math.log(0.3))]
        out.append({"token": tok, "logprob": alts[0][1], "bytes": None,
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in alts[:max(1, top)]]})
    return out


def _render(wire: str, data: dict[str, Any] | None, text: str, system: str, user: str, model: str,
            body: dict[str, Any] | None = None) -> Any:
    """A reply in the wire format: the verdict as native structured output, or raw text (with
    token log-probabilities when an OpenAI-style request asks for them)."""
    tin, tout = _tokens(system, user), _tokens(text)
    if wire == "openai":
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}
        if body and body.get("logprobs"):
            choice["logprobs"] = {"content": token_logprobs(text, int(body.get("top_logprobs") or 0))}
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                "model": model, "choices": [choice],
                "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}}
    if wire == "anthropic":
        content = ([{"type": "tool_use", "id": "toolu_1", "name": "verdict", "input": data}]
                   if data is not None else [{"type": "text", "text": text}])
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": "tool_use" if data is not None else "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": tin, "output_tokens": tout}}
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": tin, "candidatesTokenCount": tout,
                              "totalTokenCount": tin + tout}, "modelVersion": model}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each reply")
    ap.add_argument("--capacity", type=int, default=None, help="429 beyond this many requests in flight")
    ap.add_argument("--retry-ms", type=float, default=None, help="retry-after-ms of those 429s")
    args = ap.parse_args(argv)
    _die_with_parent()
    srv = JudgeServer(delay=args.delay)
    srv.capacity, srv.capacity_retry_ms = args.capacity, args.retry_ms
    srv.start(args.port)
    print(f"PORT {srv.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


def _die_with_parent() -> None:
    """Run as a script (a benchmark's server), end when the process that started it is gone, even
    killed with SIGKILL: the kernel's parent-death signal on Linux, and everywhere a thread that
    notices the parent change."""
    import os
    import signal

    parent = os.getppid()
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())


# ---- pytest fixtures ------------------------------------------------------------------------------------
def server_fixtures() -> tuple[Any, Any]:
    """``(judge_server_module, server)`` fixtures for a test module::

        judge_server_module, server = server_fixtures()

    one scripted server per module, reset for every test that asks for ``server``.
    """
    import pytest

    @pytest.fixture(scope="module")
    def judge_server_module():
        srv = JudgeServer().start()
        yield srv
        srv.stop()

    @pytest.fixture
    def server(judge_server_module):
        judge_server_module.reset()
        judge_server_module.delay = 0.0
        yield judge_server_module
        judge_server_module.reset()

    return judge_server_module, server


def judge_options(server: JudgeServer, provider: str = "openai", **extra: Any) -> dict[str, Any]:
    """Run options pointing a judge of ``provider`` at the scripted server (fast backoff)."""
    base = server.url + "/v1" if provider == "openai" else server.url
    return {"judge": f"{provider}:test-model", "judge_base_url": base,
            "judge_api_key_env": "RAGMETER_TEST_JUDGE_KEY", "judge_backoff_base": 0.01,
            "judge_backoff_max": 0.05, **extra}
