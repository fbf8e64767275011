"""Property-based tests (hypothesis) of the XC line parser and of the user-table checks.

* Every generated valid sample line is accepted and parses to exactly the sample it was made from;
  lines from a hostile alphabet are either accepted (and then parse the same after being written
  back out) or rejected with a reason.
* Through Spark: a file of generated lines round-trips ingest -> export -> ingest, and a bad line
  inserted anywhere is named by its line number.
* The Y1 / Y2 checks keep exactly the rows an independent pure-Python reading of their 8 rules
  keeps, and ``fail`` raises exactly when that reading rejects something.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eagle_spark.io.xc import Limits, parse_lines

N_FEATURES, N_LABELS = 50, 20
F32 = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=32).filter(lambda v: v != 0)


@st.composite
def samples(draw):
    labels = sorted(draw(st.sets(st.integers(0, N_LABELS - 1), max_size=5)))
    feats = draw(st.dictionaries(st.integers(0, N_FEATURES - 1), F32, max_size=8))
    if not labels and not feats:
        feats = {draw(st.integers(0, N_FEATURES - 1)): 1.0}
    return labels, dict(sorted(feats.items()))


def _line(labels, feats, shuffle_seed=None) -> str:
    items = list(feats.items())
    if shuffle_seed is not None:
        np.random.default_rng(shuffle_seed).shuffle(items)
    return ",".join(map(str, labels)) + " " + " ".join(f"{i}:{repr(float(v))}" for i, v in items)


def _parsed(batch, row):
    return (
        batch.column(2)[row].as_py(),
        batch.column(0)[row].as_py(),
        batch.column(1)[row].as_py(),
        batch.column(3)[row].as_py(),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(samples(), min_size=1, max_size=20), st.integers(0, 2**31))
def test_valid_lines_parse_to_their_sample(rows, seed):
    lines = [_line(labels, feats, seed + k) for k, (labels, feats) in enumerate(rows)]
    batch = parse_lines(pa.array(lines), Limits(N_FEATURES, N_LABELS))
    for k, (labels, feats) in enumerate(rows):
        got_labels, got_idx, got_val, reason = _parsed(batch, k)
        assert reason is None, (lines[k], reason)
        assert got_labels == labels and got_idx == list(feats)
        assert np.array_equal(np.float32(got_val), np.float32(list(feats.values())))


HOSTILE = st.text(alphabet="0123456789:,.-+eEnaifx \t", max_size=25)


@settings(max_examples=400, deadline=None)
@given(st.lists(HOSTILE, min_size=1, max_size=10))
def test_any_line_is_accepted_consistently_or_rejected_with_a_reason(lines):
    batch = parse_lines(pa.array(lines), Limits(N_FEATURES, N_LABELS))
    for k in range(len(lines)):
        labels, idx, val, reason = _parsed(batch, k)
        if reason is not None:
            assert isinstance(reason, str) and reason and not idx and not labels
            continue
        assert all(0 <= i < N_FEATURES for i in idx) and idx == sorted(set(idx))
        assert all(0 <= lab < N_LABELS for lab in labels) and labels == sorted(set(labels))
        assert all(np.isfinite(val))
        again = parse_lines(
            pa.array([_line(labels, dict(zip(idx, val)))]), Limits(N_FEATURES, N_LABELS)
        )
        assert _parsed(again, 0) == (labels, idx, val, None), lines[k]


# ------------------------------------------------------------------------------ through Spark


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    rows=st.lists(samples(), min_size=2, max_size=30),
    bad_at=st.integers(0, 29),
    bad=st.sampled_from(["0 1:", "x 1:1", "0 99:1", "", "0 1:1 1:1", "0,0 2:1"]),
)
def test_files_round_trip_through_export_and_bad_lines_are_named(
    spark, tmp_path_factory, rows, bad_at, bad
):
    from eagle_spark.cli import main

    root = tmp_path_factory.mktemp("prop")
    text = f"{len(rows)} {N_FEATURES} {N_LABELS}\n" + "\n".join(_line(*r) for r in rows) + "\n"
    (root / "in.txt").write_text(text)
    assert main(["ingest", "--input", str(root / "in.txt"), "--output", str(root / "ds")]) == 0
    assert main(["export", "--input", str(root / "ds"), "--output", str(root / "out.txt")]) == 0
    assert main(["ingest", "--input", str(root / "out.txt"), "--output", str(root / "ds2")]) == 0
    import pyarrow.parquet as pq

    for table in ("X", "Y"):
        a = pq.read_table(root / "ds" / table).sort_by("sample_id").to_pylist()
        b = pq.read_table(root / "ds2" / table).sort_by("sample_id").to_pylist()
        assert a == b
    at = min(bad_at, len(rows))
    lines = [_line(*r) for r in rows]
    lines.insert(at, bad)
    (root / "bad.txt").write_text(
        f"{len(lines)} {N_FEATURES} {N_LABELS}\n" + "\n".join(lines) + "\n"
    )
    assert main(["ingest", "--input", str(root / "bad.txt"), "--output", str(root / "ds3")]) == 2
    assert not (root / "ds3").exists()


def test_bad_line_message_names_its_line(spark, tmp_path, capsys):
    from eagle_spark.cli import main

    for at in (0, 3, 7):
        lines = ["0 1:1"] * 8
        lines[at] = "0 1:1 1:2"
        src = tmp_path / f"f{at}.txt"
        src.write_text("8 4 2\n" + "\n".join(lines) + "\n")
        assert main(["ingest", "--input", str(src), "--output", str(tmp_path / f"o{at}")]) == 2
        assert f"{src}:{at + 2}: duplicate feature id 1" in capsys.readouterr().err


# ------------------------------------------------------------------------------ user tables


def _twin(y1, y2, n_x, n_labels):
    """The 8 rules of aggregation/supplied.py read independently: kept Y1, kept Y2, counts."""
    counts = {}

    def drop(rows, bad, name):
        keep = [r for r in rows if not bad(r)]
        if len(keep) < len(rows):
            counts[name] = len(rows) - len(keep)
        return keep

    y1 = drop(
        y1,
        lambda r: r[0] is None or r[1] is None or r[0] < 0 or r[1] < 0,
        "Y1: missing or negative id",
    )
    seen, out = set(), []
    for r in y1:
        out.append((r, r in seen))
        seen.add(r)
    y1 = [r for r, dup in out if not dup]
    if len(out) > len(y1):
        counts["Y1: duplicate row"] = len(out) - len(y1)
    y1 = drop(y1, lambda r: r[0] >= n_x, "Y1: sample_id not in X")
    y2 = drop(
        y2, lambda r: r[0] < 0 or r[1] < 0 or r[2] < 1, "Y2: missing or negative id, or count < 1"
    )
    y2 = drop(y2, lambda r: r[1] >= n_labels, "Y2: label_id out of range")
    best = {}
    for g, lab, c in y2:
        best[(g, lab)] = max(best.get((g, lab), 0), c)
    if len(best) < len(y2):
        counts["Y2: duplicate row"] = len(y2) - len(best)
    y2 = [(g, lab, c) for (g, lab), c in best.items()]
    members = {g for _, g in y1}
    y2 = drop(y2, lambda r: r[0] not in members, "Y2: group without members")
    labelled = {g for g, _, _ in y2}
    y1 = drop(y1, lambda r: r[1] not in labelled, "Y1: group without labels")
    return sorted(y1), sorted(y2), counts


@pytest.mark.slow  # 6 generated pairs of tables through Spark: ~20 s
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    y1=st.lists(st.tuples(st.integers(-1, 9), st.integers(-1, 4)), min_size=1, max_size=12),
    y2=st.lists(
        st.tuples(st.integers(-1, 5), st.integers(-1, 5), st.integers(0, 3)),
        min_size=1,
        max_size=12,
    ),
)
def test_user_table_checks_agree_with_their_rules(spark, y1, y2):
    from eagle_spark.aggregation.supplied import validate_supplied
    from eagle_spark.errors import BadInputError

    n_x, n_labels = 8, 4
    X = spark.createDataFrame([(i,) for i in range(n_x)], "sample_id long")
    Y1 = spark.createDataFrame(y1, "sample_id long, group_id long")
    Y2 = spark.createDataFrame(y2, "group_id long, label_id long, count long")
    want_y1, want_y2, want_counts = _twin(y1, y2, n_x, n_labels)
    got_y1, got_y2, got_counts = validate_supplied(X, Y1, Y2, n_labels, "skip", "y1", "y2")
    assert sorted(tuple(r) for r in got_y1.collect()) == want_y1
    assert sorted(tuple(r) for r in got_y2.collect()) == want_y2
    assert got_counts == want_counts, json.dumps([y1, y2])
    if want_counts:
        with pytest.raises(BadInputError):
            validate_supplied(X, Y1, Y2, n_labels, "fail", "y1", "y2")
