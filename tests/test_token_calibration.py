"""Dry-run token estimates calibrated from the real prompt-token counts of earlier calls to the
same provider and model (when tiktoken is not available)."""

from __future__ import annotations

import pytest

import ragmeter
from judge_server import judge_options, server_fixtures
from ragmeter.llm.service import TOKEN_CALIBRATION, _tiktoken_encoding
from ragmeter.store import Store

judge_server_module, server = server_fixtures()


def _samples(prefix: str, n: int = 8) -> list[dict]:
    # Greek text: the script-aware estimate (2 characters per token) differs from the scripted
    # server's count (4 characters per token), so calibration has something to correct
    return [{"id": f"{prefix}{i}", "question": "Τι ώρα φεύγει το πρώτο πλοίο;",
             "answer": f"Το πρώτο πλοίο {prefix} φεύγει στις επτά {i}.",
             "contexts": ["Το πρώτο πλοίο φεύγει κάθε πρωί στις επτά από το λιμάνι."]} for i in range(n)]


@pytest.mark.skipif(_tiktoken_encoding() is not None, reason="with tiktoken the estimate is exact, not calibrated")
def test_dry_run_estimate_learns_from_real_calls(server, db_url, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    opts = judge_options(server)
    before = ragmeter.estimate_run_cost(_samples("a"), ["faithfulness"], db=db_url, options=opts)
    assert before["planned_calls"] == 8
    assert "no real calls" in before["token_estimate"]
    ragmeter.evaluate(_samples("b"), ["faithfulness"], db=db_url, options=opts)
    rec = Store(db_url).kv_get(TOKEN_CALIBRATION, "openai:test-model")
    assert rec["calls"] >= 5 and rec["real"] < rec["estimated"]
    after = ragmeter.estimate_run_cost(_samples("a"), ["faithfulness"], db=db_url, options=opts)
    assert after["planned_calls"] == 8  # other prompts than the calls made: nothing cached
    assert "calibrated on" in after["token_estimate"]
    ratio = rec["real"] / rec["estimated"]
    assert after["est_input_tokens"] == pytest.approx(before["est_input_tokens"] * ratio, rel=0.05)
    assert after["est_input_tokens"] < before["est_input_tokens"]


def test_a_run_records_the_script_aware_estimate_whichever_tokenizer_is_at_hand(server, db_url, monkeypatch):
    # the stored ratio scales the script-aware estimate (a tiktoken count is exact and never scaled),
    # so a run records that estimate even where tiktoken is at hand, and loads no tokenizer to do it
    import ragmeter.llm.tokens as tokens
    from ragmeter.llm.tokens import script_estimate

    class OneTokenPerCharacter:
        def encode(self, text: str, disallowed_special: tuple = ()) -> list[str]:
            return list(text)

    monkeypatch.setattr(tokens, "_TIKTOKEN", OneTokenPerCharacter())
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "k")
    ragmeter.evaluate(_samples("c"), ["faithfulness"], db=db_url, options=judge_options(server))
    rec = Store(db_url).kv_get(TOKEN_CALIBRATION, "openai:test-model")
    sent = [{m["role"]: m["content"] for m in r["body"]["messages"]} for r in server.requests]
    assert rec["calls"] == len(sent) == 8
    assert rec["estimated"] == sum(script_estimate(m["system"]) + script_estimate(m["user"]) for m in sent)
    assert rec["estimated"] != sum(len(m["system"]) + len(m["user"]) for m in sent)
