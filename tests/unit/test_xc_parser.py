"""The vectorised line parser, without Spark: every bad-input case and its message."""

import pyarrow as pa
import pytest

from eagle_spark.io.xc import Limits, parse_header, parse_lines


def parse(lines, **limits):
    return parse_lines(pa.array(lines, pa.string()), Limits(**limits)).to_pylist()


def test_good_lines_sorted_and_typed():
    rows = parse(["5,4 3:1 1:2.5 2:-3e-1", " 4:1", "3", "", "1\t2:3 "], n_features=5, n_labels=6)
    assert rows[0] == {
        "feat_idx": [1, 2, 3],
        "feat_val": [2.5, pytest.approx(-0.3), 1.0],
        "label_ids": [4, 5],
        "reason": None,
    }
    assert rows[1] == {"feat_idx": [4], "feat_val": [1.0], "label_ids": [], "reason": None}
    assert rows[2] == {"feat_idx": [], "feat_val": [], "label_ids": [3], "reason": None}
    assert rows[3] == {
        "feat_idx": [],
        "feat_val": [],
        "label_ids": [],
        "reason": "blank line: a sample line needs a label field or features",
    }
    assert rows[4] == {"feat_idx": [2], "feat_val": [3.0], "label_ids": [1], "reason": None}


@pytest.mark.parametrize(
    "line, message",
    [
        ("1 a:1", "non-numeric feature id in 'a:1'"),
        ("1 1:e", "non-numeric feature value in '1:e'"),
        ("1,x 0:1", "non-numeric label id 'x'"),
        ("3 1:1 2", "missing ':' in feature token '2'"),
        ("1 -3:1", "negative feature id in '-3:1'"),
        ("-1 0:1", "negative label id '-1'"),
        ("1 7:1", "feature id 7 is not below n_features=5"),
        ("9 1:1", "label id 9 is not below n_labels=6"),
        ("1 0:1 0:2", "duplicate feature id 0"),
        ("2,1,2 1:1", "duplicate label id 2"),
        ("2 1:nan", "NaN or infinite feature value in '1:nan'"),
        ("2 1:-inf", "NaN or infinite feature value in '1:-inf'"),
        ("2 1:1e39", "feature value 1e+39 overflows float32"),
        ("1,,2 1:1", "empty label id in label field '1,,2'"),
        ("1 1:2:3", "non-numeric feature value in '1:2:3'"),
    ],
)
def test_bad_line_message(line, message):
    good, bad = parse(["0 0:1", line], n_features=5, n_labels=6)
    assert good["reason"] is None
    assert bad["reason"] == message
    assert bad["feat_idx"] == [] and bad["label_ids"] == []


def test_one_based_shifts_features_only():
    rows = parse(["1 1:1 5:2", "1 0:1"], n_features=5, n_labels=2, one_based=True)
    assert rows[0]["feat_idx"] == [0, 4] and rows[0]["label_ids"] == [1]
    assert rows[1]["reason"] == "feature id 0 is invalid with one-based ids"


def test_unbounded_ids_without_limits():
    rows = parse(["70000 123456:1"])
    assert rows[0]["feat_idx"] == [123456] and rows[0]["label_ids"] == [70000]


def test_header():
    assert parse_header("10 20 30") == (10, 20, 30)
    for bad in ["10 20", "a b c", "1 2 3 4", "-1 2 3"]:
        with pytest.raises(ValueError, match="header must be three non-negative integers"):
            parse_header(bad)
    with pytest.raises(ValueError, match="the file is empty"):
        parse_header(None)
