"""Agreement coefficients against published worked examples and against the reference libraries
(scikit-learn's cohen_kappa_score, the krippendorff package, statsmodels' fleiss_kappa), the
undefined cases, the CSV layouts, and the `ragmeter agreement` command."""

from __future__ import annotations

import json
import math

import krippendorff  # the reference for alpha (an extra of ragmeter's): missing, this module fails, never skips
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ragmeter.apps.cli import app
from ragmeter.stats.agreement import (
    Ratings,
    agreement,
    code_labels,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    percent_agreement,
    read_ratings,
)
from references import require_reference

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the 4 observers x 12 units
# example with missing values; published: nominal .743, ordinal .815, interval .849, ratio .797
KRIPP = [[1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
         [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
         [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
         [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN]]
# Fleiss (1971) as reproduced in most textbooks: 10 subjects, 14 raters, 5 categories; kappa 0.210
FLEISS = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
          [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


@pytest.mark.parametrize("level,published", [("nominal", 0.743), ("ordinal", 0.815),
                                             ("interval", 0.849), ("ratio", 0.797)])
def test_krippendorff_published_example(level, published):
    assert krippendorff_alpha(KRIPP, level_of_measurement=level) == pytest.approx(published, abs=5e-4)


def test_krippendorff_binary_example():
    # Krippendorff (2011), two observers, ten units, binary data: alpha = 0.095
    a = [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]]
    assert krippendorff_alpha(reliability_data=a) == pytest.approx(0.095, abs=5e-4)


def test_krippendorff_value_counts_same_as_data():
    data = np.array(KRIPP)
    counts = np.stack([(data == v).sum(axis=0) for v in range(1, 6)], axis=1)
    assert krippendorff_alpha(value_counts=counts) == pytest.approx(
        krippendorff_alpha(reliability_data=KRIPP))


@pytest.mark.contract
def test_fleiss_published_example_and_statsmodels():
    sm_fleiss = require_reference("statsmodels.stats.inter_rater").fleiss_kappa

    assert fleiss_kappa(FLEISS) == pytest.approx(0.210, abs=5e-4)
    assert fleiss_kappa(FLEISS) == pytest.approx(sm_fleiss(np.array(FLEISS), method="fleiss"))
    with pytest.raises(ValueError, match="same number of ratings"):
        fleiss_kappa([[1, 1], [2, 1]])


def test_cohen_textbook_example():
    # 50 items, both "yes" 20, A yes/B no 5, A no/B yes 10, both "no" 15: p_o .7, p_e .5, kappa .4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


@pytest.mark.contract
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=40),
       st.sampled_from([None, "linear", "quadratic"]))
def test_cohen_matches_sklearn(pairs, weights):
    import warnings

    cohen_kappa_score = require_reference("sklearn.metrics").cohen_kappa_score

    y1, y2 = [p[0] for p in pairs], [p[1] for p in pairs]
    ours = cohen_kappa(y1, y2, weights=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = cohen_kappa_score(y1, y2, weights=weights)
    if math.isnan(ref):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(ref, abs=1e-12)
    labels = [5, 4, 3, 2, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = cohen_kappa_score(y1, y2, labels=labels, weights=weights)
    ours = cohen_kappa(y1, y2, labels=labels, weights=weights)
    assert (math.isnan(ours) and math.isnan(ref)) or ours == pytest.approx(ref, abs=1e-12)


@pytest.mark.contract
@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3), min_size=2, max_size=30))
def test_fleiss_matches_statsmodels(rows):
    aggregate_raters = require_reference("statsmodels.stats.inter_rater").aggregate_raters
    sm_fleiss = require_reference("statsmodels.stats.inter_rater").fleiss_kappa

    table, _ = aggregate_raters(np.array(rows), n_cat=4)
    ours = fleiss_kappa(table)
    with np.errstate(all="ignore"):
        ref = sm_fleiss(table)
    if math.isnan(ours):
        assert len({v for r in rows for v in r}) == 1
    else:
        assert ours == pytest.approx(ref, abs=1e-12)


def test_undefined_is_nan_never_zero():
    assert math.isnan(cohen_kappa([2, 2, 2], [2, 2, 2]))
    assert math.isnan(krippendorff_alpha([[3, 3, 3], [3, 3, NAN]]))
    assert math.isnan(fleiss_kappa([[3, 0], [3, 0]]))
    r = Ratings.from_long([(i, r, "yes") for i in range(5) for r in ("a", "b")])
    for method in ("alpha", "kappa", "fleiss"):
        res = agreement(r, method, n_bootstrap=50)
        assert res.value is None and "one category" in res.undefined
    assert agreement(r, "percent", n_bootstrap=10).value == 1.0
    assert percent_agreement([[1, 2, 1], [1, 1, NAN]]) == pytest.approx(0.5)


def test_bootstrap_interval_contains_value_and_is_reproducible():
    r = Ratings.from_long([(i, f"r{k}", v) for k, row in enumerate(KRIPP) for i, v in enumerate(row)
                           if not np.isnan(v)])
    a = agreement(r, "alpha", level="ordinal", n_bootstrap=300, seed=1)
    b = agreement(r, "alpha", level="ordinal", n_bootstrap=300, seed=1)
    assert a.value == pytest.approx(0.815, abs=5e-4)
    assert a.ci_low <= a.value <= a.ci_high and (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert a.n_items == 11 and "fewer than two ratings" in a.notes[0]


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_read_long_and_wide_agree(tmp_path):
    long = "item,rater,label\n" + "".join(
        f"u{i},r{k},{int(v)}\n" for k, row in enumerate(KRIPP) for i, v in enumerate(row) if not np.isnan(v))
    wide = "item,r0,r1,r2,r3\n" + "".join(
        f"u{i}," + ",".join("" if np.isnan(row[i]) else str(int(row[i])) for row in KRIPP) + "\n"
        for i in range(12))
    a = read_ratings(_write(tmp_path, "long.csv", long))
    b = read_ratings(_write(tmp_path, "wide.csv", wide))
    assert a.raters == b.raters == ["r0", "r1", "r2", "r3"]
    for lvl in ("nominal", "interval"):
        assert krippendorff_alpha(a.data, level_of_measurement=lvl) == pytest.approx(
            krippendorff_alpha(b.data, level_of_measurement=lvl))


def test_text_labels_need_order_for_ordinal(tmp_path):
    p = _write(tmp_path, "t.csv", "id,ana,bruno\n1,low,low\n2,high,mid\n3,mid,mid\n4,high,high\n")
    r = read_ratings(p)
    with pytest.raises(ValueError, match="no order"):
        agreement(r, "alpha", level="ordinal")
    r = read_ratings(p, order=["low", "mid", "high"])
    assert agreement(r, "alpha", level="ordinal", n_bootstrap=0).value == pytest.approx(
        krippendorff_alpha([[0, 2, 1, 2], [0, 1, 1, 2]], level_of_measurement="ordinal"))


runner = CliRunner()


@pytest.mark.contract
def test_cli_agreement_methods(tmp_path):
    wide = "item,ana,bruno\n" + "".join(f"{i},{a},{b}\n" for i, (a, b) in enumerate(
        [(1, 1), (2, 2), (3, 4), (4, 4), (5, 5), (2, 3), (1, 2), (5, 4), (3, 3), (4, 4)]))
    p = _write(tmp_path, "w.csv", wide)
    res = runner.invoke(app, ["agreement", str(p), "--method", "alpha", "--level", "ordinal"])
    assert res.exit_code == 0, res.output
    assert "Krippendorff's alpha (ordinal)" in res.output and "95% CI [" in res.output
    res = runner.invoke(app, ["agreement", str(p), "--method", "kappa", "--weights", "quadratic", "--json"])
    out = json.loads(res.output)
    cohen_kappa_score = require_reference("sklearn.metrics").cohen_kappa_score

    a = [1, 2, 3, 4, 5, 2, 1, 5, 3, 4]
    b = [1, 2, 4, 4, 5, 3, 2, 4, 3, 4]
    assert out["value"] == pytest.approx(cohen_kappa_score(a, b, weights="quadratic"))
    assert out["ci_low"] <= out["value"] <= out["ci_high"]
    res = runner.invoke(app, ["agreement", str(p), "--method", "fleiss"])
    assert res.exit_code == 0 and "Fleiss' kappa: " in res.output and "CI [" in res.output
    res = runner.invoke(app, ["agreement", str(p), "--method", "alpha", "--min", "0.99"])
    assert res.exit_code == 1


def test_cli_errors_and_undefined(tmp_path):
    p = _write(tmp_path, "one.csv", "item,rater,label\n1,a,x\n1,b,x\n2,a,x\n2,b,x\n")
    res = runner.invoke(app, ["agreement", str(p)])
    assert res.exit_code == 3 and "undefined" in res.output
    three = _write(tmp_path, "three.csv", "item,a,b,c\n1,1,2,1\n2,2,2,2\n3,1,1,2\n")
    res = runner.invoke(app, ["agreement", str(three), "--method", "kappa"])
    assert res.exit_code == 2 and "two raters" in res.output
    res = runner.invoke(app, ["agreement", str(three), "--method", "kappa", "--raters", "a,b"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["agreement", str(tmp_path / "nope.csv")])
    assert res.exit_code == 2 and "cannot read" in res.output


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.integers(1, 3)), min_size=4, max_size=4), min_size=1, max_size=12))
def test_percent_agreement_counts_agreeing_pairs(rows):
    from itertools import combinations

    data = np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=float).T
    shares = []
    for col in data.T:
        v = [x for x in col if not np.isnan(x)]
        pairs = list(combinations(v, 2))
        if pairs:
            shares.append(sum(a == b for a, b in pairs) / len(pairs))
    got = percent_agreement(data)
    assert (math.isnan(got) and not shares) or got == pytest.approx(np.mean(shares))


# ---- text labels: nominal, and ordinal / interval with a value domain ---------------------------
SCALE = ["very low", "low", "medium", "high", "very high"]


def _reference_alpha(data, level, domain):
    """``krippendorff.alpha`` on the same arguments; its refusals of undefined data as ``nan``."""
    try:
        with np.errstate(all="ignore"):  # 0/0 when one value only: nan, as ragmeter says
            return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=domain))
    except ValueError as exc:
        if "at least one unit" in str(exc) or "more than one value" in str(exc):
            return math.nan
        raise


def _same(ours, ref):
    return (math.isnan(ours) and math.isnan(ref)) or ours == pytest.approx(ref, abs=1e-12)


def _random_ratings(rng, pool, p_missing):
    raters, items = int(rng.integers(2, 6)), int(rng.integers(1, 16))
    return [[NAN if rng.random() < p_missing else str(rng.choice(pool)) for _ in range(items)]
            for _ in range(raters)]


@pytest.mark.contract
@pytest.mark.parametrize("seed", range(6))
def test_text_labels_equal_the_krippendorff_package_on_random_data(seed):
    rng = np.random.default_rng(seed)
    words = ["yes", "no", "maybe", "n/a", "très bien", "  spaced  label ", "低", "0", "10"]
    checked = {"nominal": 0, "nominal+domain": 0, "ordinal": 0, "undefined": 0}
    for _ in range(60):
        # nominal: any strings, no order
        pool = list(rng.choice(words, size=int(rng.integers(1, 6)), replace=False))
        data = _random_ratings(rng, pool, float(rng.choice([0.0, 0.2, 0.5])))
        ours, ref = krippendorff_alpha(data), _reference_alpha(data, "nominal", None)
        assert _same(ours, ref), (data, ours, ref)
        checked["nominal"] += 1
        checked["undefined"] += math.isnan(ours)
        # the same with the domain given (values that never occur included)
        domain = pool + [w for w in words if w not in pool][:2]
        assert _same(krippendorff_alpha(data, value_domain=domain), _reference_alpha(data, "nominal", domain))
        checked["nominal+domain"] += 1
        # ordinal: an ordered scale (in its own order, not alphabetical), some levels unused
        scale = SCALE if rng.random() < 0.5 else list(rng.permutation(SCALE))
        used = list(rng.choice(scale, size=int(rng.integers(1, 6)), replace=False))
        data = _random_ratings(rng, used, float(rng.choice([0.0, 0.3])))
        ours = krippendorff_alpha(data, level_of_measurement="ordinal", value_domain=scale)
        ref = _reference_alpha(data, "ordinal", scale)
        assert _same(ours, ref), (data, scale, ours, ref)
        checked["ordinal"] += 1
        checked["undefined"] += math.isnan(ours)
    # the random data reached the defined and the undefined cases
    assert checked["undefined"] > 5 and checked["ordinal"] - checked["undefined"] > 20


@pytest.mark.contract
@given(st.lists(st.lists(st.one_of(st.none(), st.sampled_from(SCALE)), min_size=6, max_size=6),
                min_size=2, max_size=5))
@settings(max_examples=120, deadline=None)
def test_ordinal_and_interval_text_equal_the_package_on_positions_and_numbers(rows):
    text = [[NAN if v is None else v for v in r] for r in rows]
    with_none = [list(r) for r in rows]  # None, the other way to leave a rating out
    pos = [[NAN if v is None else float(SCALE.index(v)) for v in r] for r in rows]
    num = [[NAN if v is None else str(SCALE.index(v) + 1) for v in r] for r in rows]  # "1" .. "5"
    ordinal = krippendorff_alpha(text, level_of_measurement="ordinal", value_domain=SCALE)
    assert _same(ordinal, _reference_alpha(text, "ordinal", SCALE))
    assert _same(krippendorff_alpha(with_none, level_of_measurement="ordinal", value_domain=SCALE), ordinal)
    # interval: the scale's levels equally spaced, as the numbers 1-5 (alpha is unchanged by a shift)
    interval = krippendorff_alpha(text, level_of_measurement="interval", value_domain=SCALE)
    assert _same(interval, _reference_alpha(pos, "interval", list(range(5))))
    assert _same(krippendorff_alpha(num, level_of_measurement="interval", value_domain=["1", "2", "3", "4", "5"]),
                 _reference_alpha([[float(v) for v in r] for r in num], "interval", [1, 2, 3, 4, 5]))
    assert _same(krippendorff_alpha(text), _reference_alpha(text, "nominal", None))


def test_text_label_edges_and_errors():
    # Krippendorff's own example in words (the krippendorff package's docstring): ordinal .815, nominal .743
    words = [[SCALE[int(v) - 1] if not np.isnan(v) else NAN for v in row] for row in KRIPP]
    assert krippendorff_alpha(words, level_of_measurement="ordinal", value_domain=SCALE) == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(words) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(np.array(words)) == pytest.approx(0.743, abs=5e-4)  # numpy's "nan" text: missing
    # one label only, all the same, one rater, a one-value domain: undefined, never 0
    assert math.isnan(krippendorff_alpha([["low", "low"], ["low", NAN]]))
    assert math.isnan(krippendorff_alpha([["low", "low"], ["low", "low"]], level_of_measurement="ordinal",
                                         value_domain=SCALE))
    assert math.isnan(krippendorff_alpha([["low", "high"], [NAN, None]]))
    assert math.isnan(krippendorff_alpha([["low", "low"], ["low", ""]], value_domain=["low"]))
    with pytest.raises(ValueError, match=r"not in value_domain: 'extreme' \(value_domain: 'very low'"):
        krippendorff_alpha([["low", "extreme"], ["low", "low"]], level_of_measurement="ordinal", value_domain=SCALE)
    with pytest.raises(ValueError, match="ordinal alpha of text labels needs their order"):
        krippendorff_alpha([["low", "high"], ["low", "low"]], level_of_measurement="ordinal")
    with pytest.raises(ValueError, match="ratio alpha needs numeric labels"):
        krippendorff_alpha([["low", "high"], ["low", "low"]], level_of_measurement="ratio", value_domain=SCALE)
    with pytest.raises(ValueError, match="repeats 'low'"):
        code_labels([["low"]], ["low", "high", "low"])
    with pytest.raises(ValueError, match="2-D"):
        krippendorff_alpha([["low", "high"], ["low"]])
    # numbers stay numbers; integral floats match a domain written as text
    assert code_labels([[1, 2], [NAN, 2]])[1] is None
    assert code_labels([[1.0, 2.0]], ["1", "2"])[0].tolist() == [[0.0, 1.0]]
    assert percent_agreement([["a", "b", "a"], ["a", "a", None]]) == pytest.approx(0.5)


@pytest.mark.contract
def test_cli_reads_text_labels_with_a_value_domain(tmp_path):
    words = [[SCALE[int(v) - 1] if not np.isnan(v) else "" for v in row] for row in KRIPP]
    wide = "item," + ",".join(f"r{k}" for k in range(4)) + "\n" + "".join(
        f"u{i}," + ",".join(row[i] for row in words) + "\n" for i in range(12))
    p = _write(tmp_path, "scale.csv", wide)
    long = _write(tmp_path, "long.csv", "item,rater,label\n" + "".join(
        f"u{i},r{k},{row[i]}\n" for k, row in enumerate(words) for i in range(12) if row[i]))
    ref = {lvl: _reference_alpha([[w or NAN for w in row] for row in words], lvl, SCALE if lvl != "nominal" else None)
           for lvl in ("nominal", "ordinal")}
    for f in (p, long):
        for lvl in ("nominal", "ordinal", "interval"):
            res = runner.invoke(app, ["agreement", str(f), "--level", lvl, "--value-domain", ",".join(SCALE),
                                      "--bootstrap", "50", "--json"])
            assert res.exit_code == 0, res.output
            value = json.loads(res.output)["value"]
            assert value == pytest.approx(ref.get(lvl, 0.849), abs=1e-12 if lvl in ref else 5e-4), (f, lvl)
        res = runner.invoke(app, ["agreement", str(f), "--json", "--bootstrap", "0"])  # nominal, no domain needed
        assert res.exit_code == 0 and json.loads(res.output)["value"] == pytest.approx(ref["nominal"])
    # a label outside the value domain: exit 2 naming the file, the line and the column
    res = runner.invoke(app, ["agreement", str(p), "--level", "ordinal", "--value-domain", "very low,low,medium,high"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    text = " ".join(res.output.split())
    assert "scale.csv, line 11, field 'r1': label 'very high' is not in the value domain" in text, text
    res = runner.invoke(app, ["agreement", str(long), "--level", "ordinal", "--categories", "very low,low,medium,high"])
    assert res.exit_code == 2 and "long.csv, line 20, field 'label'" in " ".join(res.output.split())
    res = runner.invoke(app, ["agreement", str(p), "--level", "ordinal"])
    assert res.exit_code == 2 and "--value-domain" in " ".join(res.output.split())
    res = runner.invoke(app, ["agreement", str(p), "--level", "ratio", "--value-domain", ",".join(SCALE)])
    assert res.exit_code == 2 and "ratio alpha needs numeric labels" in " ".join(res.output.split())
