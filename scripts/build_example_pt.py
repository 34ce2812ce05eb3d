"""Build the bundled Portuguese example (``ragmeter eval example-pt``) from its corpus and the table below.

Writes ``src/ragmeter/data/example_pt/chunks.jsonl`` and ``samples.jsonl``. The corpus is a
Portuguese version of part of the English example's handbook (the fictional ferry company, its
routes and the quiz sheet). Chunks and ground truth are made as in ``scripts/build_example.py``:
paragraphs (headings joined to the paragraph after them) with their character spans, and relevant
chunks chosen by hand through a unique needle string. Retrieved ``contexts`` come from a simple
lexical retriever (Snowball-stemmed Portuguese words without bm25s's Portuguese stopwords, cosine of
word counts; no model needed), top k cycling 4, 3, 5; ``"miss"`` drops the relevant chunks.

Labels are human correctness labels: 1 for ``exact`` and ``paraphrase`` answers, 0 for ``wrong``
(including negated answers such as "A capital de Portugal não é Lisboa."), ``idk`` ("Não sei.") and
``partial``. Every sample has ``metadata.language = "pt"``, so every language-aware step uses
Portuguese without ``--language``.

    PYTHONPATH=src python scripts/build_example_pt.py
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "ragmeter" / "data" / "example_pt"
CORPUS = OUT / "corpus"
LABEL_OF_KIND = {"exact": 1, "paraphrase": 1, "wrong": 0, "idk": 0, "partial": 0}
K_CYCLE = (4, 3, 5)

# (id, question, references, [(file, needle)], [(kind, answer, retrieval)])
QUESTIONS: list[tuple[str, str, list[str], list[tuple[str, str]], list[tuple[str, str, str]]]] = [
    ("capital-portugal", "Qual é a capital de Portugal?", ["Lisboa"],
     [("geografia.md", "Lisboa é a capital de Portugal")],
     [("exact", "A capital de Portugal é Lisboa.", "dense"),
      ("wrong", "A capital de Portugal não é Lisboa.", "dense"),
      ("wrong", "A capital de Portugal é o Porto.", "dense"),
      ("idk", "Não sei.", "miss"),
      ("paraphrase", "É Lisboa, onde fica a sede do governo.", "dense")]),
    ("capital-espanha", "Qual é a capital de Espanha?", ["Madrid", "Madrid é a capital da Espanha."],
     [("geografia.md", "Madrid é a capital da Espanha")],
     [("exact", "Madrid é a capital da Espanha.", "dense"),
      ("wrong", "A capital de Espanha é Barcelona.", "dense")]),
    ("rio-tejo", "Qual é o rio mais longo da Península Ibérica?", ["O Tejo."],
     [("geografia.md", "O Tejo é o rio mais longo")],
     [("exact", "O Tejo é o rio mais longo da Península Ibérica.", "dense"),
      ("wrong", "O Tejo nunca foi o rio mais longo da península.", "dense"),
      ("idk", "O texto não menciona qual é o rio mais longo.", "miss")]),
    ("torre", "Qual é a altitude da Torre, na Serra da Estrela?", ["1993 metros"],
     [("geografia.md", "com 1993 metros")],
     [("exact", "A Torre tem 1993 metros.", "dense"),
      ("wrong", "Tem 2351 metros.", "dense")]),
    ("fundacao", "Quando foi fundada a Tidewell Ferries e por quem?",
     ["A Tidewell Ferries foi fundada em 1987 por Margit Halloran."],
     [("empresa.md", "foi fundada em 1987 por Margit Halloran")],
     [("exact", "Foi fundada em 1987 por Margit Halloran.", "dense"),
      ("partial", "Foi fundada em 1987.", "dense"),
      ("wrong", "Foi fundada em 1994 por Margit Halloran.", "dense")]),
    ("presidente", "Quem é o presidente executivo da Tidewell Ferries?",
     ["Daniel Okafor", "O presidente executivo é Daniel Okafor."],
     [("empresa.md", "O presidente executivo é Daniel Okafor")],
     [("exact", "O presidente executivo é Daniel Okafor.", "dense"),
      ("wrong", "O presidente executivo é Priya Ramaswamy.", "dense"),
      ("wrong", "O presidente executivo não é Daniel Okafor.", "dense"),
      ("paraphrase", "Daniel Okafor, presidente executivo desde abril de 2016.", "dense")]),
    ("funcionarios", "Quantas pessoas emprega a Tidewell?", ["412", "A Tidewell emprega 412 pessoas."],
     [("empresa.md", "A Tidewell emprega 412 pessoas")],
     [("exact", "A Tidewell emprega 412 pessoas.", "dense"),
      ("wrong", "Cerca de 268 pessoas trabalham na Tidewell.", "dense"),
      ("idk", "Não tenho certeza.", "miss")]),
    ("maior-navio", "Qual é o maior navio da frota da Tidewell?", ["MV Aurora Lind"],
     [("empresa.md", "O maior navio da frota é o MV Aurora Lind")],
     [("paraphrase", "É o Aurora Lind, que entrou ao serviço em 2023 e leva 700 passageiros.", "dense"),
      ("wrong", "O maior navio é o MV Sorrel Queen.", "dense")]),
    ("tern", "Quando será retirado de serviço o MV Tern?", ["Em 2027."],
     [("empresa.md", "que será retirado de serviço em 2027")],
     [("exact", "O MV Tern será retirado de serviço em 2027.", "dense"),
      ("idk", "O manual não diz quando o Tern será retirado.", "miss")]),
    ("conselho", "Quantas vezes por ano se reúne o conselho de administração?",
     ["Quatro vezes por ano, em fevereiro, maio, agosto e novembro."],
     [("empresa.md", "reúne-se quatro vezes por ano")],
     [("exact", "Reúne-se quatro vezes por ano, em fevereiro, maio, agosto e novembro.", "dense"),
      ("wrong", "Uma vez por mês.", "dense")]),
    ("halden-travessia", "Quanto tempo demora a travessia de Port Averly a Halden Isle?",
     ["55 minutos", "A travessia até Halden Isle demora 55 minutos."],
     [("rotas.md", "A travessia até Halden Isle demora 55 minutos")],
     [("exact", "A travessia até Halden Isle demora 55 minutos.", "dense"),
      ("paraphrase", "Pouco menos de uma hora, cerca de 55 minutos.", "dense"),
      ("wrong", "Demora 40 minutos.", "dense")]),
    ("saltmere-carros", "O ferry para Saltmere transporta carros?",
     ["Não, o MV Kittiwake transporta apenas passageiros."],
     [("rotas.md", "que transporta apenas passageiros e nenhum veículo")],
     [("exact", "Não, o MV Kittiwake só transporta passageiros.", "dense"),
      ("wrong", "Sim, transporta carros e passageiros.", "dense"),
      ("idk", "Não sei se transporta carros.", "miss")]),
    ("terminal-saltmere", "De que terminal sai o ferry rápido para Saltmere?", ["Terminal B"],
     [("rotas.md", "que sai do Terminal B no cais norte")],
     [("exact", "Sai do Terminal B, no cais norte.", "dense"),
      ("wrong", "Sai do Terminal A.", "dense")]),
    ("domingo", "Há serviço para Little Corran ao domingo?",
     ["Não, exceto em julho e agosto."],
     [("rotas.md", "Não há serviço ao domingo")],
     [("exact", "Não há serviço ao domingo, exceto em julho e agosto.", "dense"),
      ("wrong", "Sim, há serviço todos os domingos do ano.", "dense")]),
    ("bagagem", "Quantas malas pode levar cada passageiro sem custo?",
     ["Duas malas de até 23 kg."],
     [("rotas.md", "Cada passageiro pode levar duas malas")],
     [("exact", "Cada passageiro pode levar duas malas de até 23 kg sem custo.", "dense"),
      ("wrong", "Apenas uma mala.", "dense"),
      ("idk", "Essa informação não é mencionada.", "miss")]),
]


def chunk_file(name: str, text: str) -> list[dict]:
    """Paragraphs with spans; a heading line is joined to the paragraph after it."""
    out: list[dict] = []
    pending: int | None = None
    for m in re.finditer(r"(?:[^\n]+\n?)+", text):
        start, end = m.start(), m.start() + len(m.group().rstrip("\n"))
        if m.group().startswith("#") and m.group().count("\n") <= 1 and end < len(text.rstrip()):
            pending = start if pending is None else pending
            continue
        s = pending if pending is not None else start
        pending = None
        out.append({"id": f"{name}#{len(out)}", "source": name, "start": s, "end": end, "text": text[s:end]})
    return out


def main() -> None:
    from ragmeter.core import language as lang

    stop = {lang.fold(w) for w in lang.stopwords("pt")}

    def bag(text: str) -> Counter:
        return Counter(lang.stem(lang.fold(w), "pt") for w in lang.words(text) if lang.fold(w) not in stop)

    def cos(a: Counter, b: Counter) -> float:
        num = sum(v * b[k] for k, v in a.items())
        den = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
        return num / den if den else 0.0

    chunks: list[dict] = []
    for path in sorted(CORPUS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for c in chunk_file(path.name, text):
            assert text[c["start"]:c["end"]] == c["text"]
            chunks.append(c)
    bags = [bag(c["text"]) for c in chunks]
    samples = []
    n = 0
    for qid, question, refs, rel, answers in QUESTIONS:
        relevant = []
        for file, needle in rel:
            hits = [c for c in chunks if c["source"] == file and needle in c["text"]]
            assert len(hits) == 1, (qid, needle, len(hits))
            relevant.append({**hits[0], "grade": 3})
        rel_ids = {r["id"] for r in relevant}
        qb = bag(question)
        ranked = sorted(range(len(chunks)), key=lambda i: (-cos(qb, bags[i]), chunks[i]["id"]))
        for j, (kind, answer, retrieval) in enumerate(answers, start=1):
            k = K_CYCLE[n % len(K_CYCLE)]
            n += 1
            order = [i for i in ranked if retrieval != "miss" or chunks[i]["id"] not in rel_ids][:k]
            contexts = [{**chunks[i], "score": round(cos(qb, bags[i]), 4)} for i in order]
            samples.append({"id": f"{qid}-{j}", "question": question, "answer": answer, "references": refs,
                            "contexts": contexts, "relevant": relevant, "label": LABEL_OF_KIND[kind],
                            "metadata": {"question_id": qid, "answer_kind": kind, "language": "pt"}})
    with (OUT / "chunks.jsonl").open("w", encoding="utf-8") as fh:
        for c in chunks:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    with (OUT / "samples.jsonl").open("w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    print(f"{len(chunks)} chunks, {len(samples)} samples "
          f"({sum(s['label'] for s in samples)} correct, {sum(1 - s['label'] for s in samples)} wrong)")


if __name__ == "__main__":
    main()
