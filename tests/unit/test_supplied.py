"""User-supplied Y1/Y2: every bad-input case with its message, skip mode counts, CSV and Parquet."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eagle_spark.cli import main
from eagle_spark.io.ingest import ingest
from eagle_spark.io.tables import read_table
from eagle_spark.settings import IngestSettings

GOOD_Y1 = [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2)]
GOOD_Y2 = [(0, 1, 2), (0, 3, 1), (1, 0, 1), (2, 4, 1)]


@pytest.fixture
def base(spark, tmp_path, write_text):
    src = write_text(
        "six.txt", "6 4 5\n" + "\n".join(f"{i % 5} {i % 4}:1" for i in range(6)) + "\n"
    )
    ds = str(tmp_path / "ds")
    ingest(spark, src, ds, IngestSettings())
    return ds


def csv(write_text, name, header, rows):
    return write_text(name, header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")


def parquet(tmp_path, name, names, rows):
    path = tmp_path / name
    pq.write_table(pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)}), path)
    return str(path)


def run(capsys, base, out, y1, y2, *extra):
    code = main(
        ["aggregate", "--input", base, "--output", str(out), "--y1", y1, "--y2", y2, *extra]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_good_tables_csv_and_parquet(spark, base, tmp_path, write_text, capsys):
    for kind in ("csv", "parquet"):
        if kind == "csv":
            y1 = csv(write_text, "y1.csv", "sample_id,group_id", GOOD_Y1)
            y2 = csv(write_text, "y2.csv", "group_id,label_id,count", GOOD_Y2)
        else:
            y1 = parquet(tmp_path, "y1.parquet", ["sample_id", "group_id"], GOOD_Y1)
            y2 = parquet(tmp_path, "y2.parquet", ["group_id", "label_id"], [r[:2] for r in GOOD_Y2])
        out = tmp_path / f"agg_{kind}"
        code, stdout, _ = run(capsys, base, out, y1, y2)
        assert code == 0 and json.loads(stdout)["n_groups"] == 3
        assert sorted(tuple(r) for r in read_table(spark, str(out), "Y1").collect()) == GOOD_Y1
        counts = [r[2] for r in GOOD_Y2] if kind == "csv" else [1] * 4
        assert sorted(tuple(r) for r in read_table(spark, str(out), "Y2").collect()) == [
            (g, l, c) for (g, l, _), c in zip(GOOD_Y2, counts)
        ]
        manifest = json.loads((out / "_manifest.json").read_text())
        assert manifest["parameters"]["grouping"] == "supplied" and manifest["rejected"] == {}


BAD = [
    ("y1", [(9, 0)], "Y1 table {y1}: sample_id 9 is not in X"),
    ("y1", [(0, 0)], "Y1 table {y1}: duplicate row (sample_id=0, group_id=0)"),
    (
        "y1",
        [("abc", 0)],
        "{y1}:{l1}: sample_id 'abc' is not a non-negative whole number: line 'abc,0'",
    ),
    ("y1", [(-1, 0)], "{y1}:{l1}: sample_id '-1' is not a non-negative whole number: line '-1,0'"),
    ("y1", [(5, 3)], "Y1 table {y1}: group_id 3 has members but no labels in Y2"),
    ("y2", [(0, 7, 1)], "Y2 table {y2}: label_id 7 (group_id=0) is out of range [0, 5)"),
    ("y2", [(4, 1, 1)], "Y2 table {y2}: group_id 4 has labels but no members in Y1"),
    ("y2", [(0, 1, 1)], "Y2 table {y2}: duplicate row (group_id=0, label_id=1)"),
    ("y2", [(1, 2, 0)], "{y2}:{l2}: count '0' is not a whole number >= 1: line '1,2,0'"),
]


@pytest.mark.parametrize("table, extra, message", BAD)
def test_bad_rows_fail(spark, base, tmp_path, write_text, capsys, table, extra, message):
    y1 = csv(write_text, "y1.csv", "sample_id,group_id", GOOD_Y1 + (extra if table == "y1" else []))
    y2 = csv(
        write_text, "y2.csv", "group_id,label_id,count", GOOD_Y2 + (extra if table == "y2" else [])
    )
    out = tmp_path / "agg"
    code, stdout, err = run(capsys, base, out, y1, y2)
    assert code == 2 and stdout == ""
    # CSV cells are named by file and line (the header is line 1, the extra row comes last)
    assert message.format(y1=y1, y2=y2, l1=len(GOOD_Y1) + 2, l2=len(GOOD_Y2) + 2) in err
    assert not out.exists()


def test_bad_rows_skip_counts(spark, base, tmp_path, write_text, capsys):
    y1_extra = [r for t, rows, _ in BAD if t == "y1" for r in rows]
    y2_extra = [r for t, rows, _ in BAD if t == "y2" for r in rows]
    y1 = csv(write_text, "y1.csv", "sample_id,group_id", GOOD_Y1 + y1_extra)
    y2 = csv(write_text, "y2.csv", "group_id,label_id,count", GOOD_Y2 + y2_extra)
    out = tmp_path / "agg"
    code, stdout, _ = run(capsys, base, out, y1, y2, "--on-bad-row", "skip")
    manifest = json.loads((out / "_manifest.json").read_text())
    assert code == 0 and json.loads(stdout)["rejected_rows"] == 9
    assert manifest["rejected"] == {
        "Y1: missing or negative id": 2,
        "Y1: duplicate row": 1,
        "Y1: sample_id not in X": 1,
        "Y2: missing or negative id, or count < 1": 1,
        "Y2: label_id out of range": 1,
        "Y2: duplicate row": 1,
        "Y2: group without members": 1,
        "Y1: group without labels": 1,
    }
    assert sorted(tuple(r) for r in read_table(spark, str(out), "Y1").collect()) == GOOD_Y1
    assert sorted(tuple(r) for r in read_table(spark, str(out), "Y2").collect()) == GOOD_Y2


def test_table_problems(spark, base, tmp_path, write_text, capsys):
    y1 = csv(write_text, "y1.csv", "sample_id,group_id", GOOD_Y1)
    y2 = csv(write_text, "y2.csv", "group_id,label_id", [r[:2] for r in GOOD_Y2])
    code, _, err = run(capsys, base, tmp_path / "a", y1, str(tmp_path / "missing.csv"))
    assert code == 2 and "missing.csv does not exist" in err
    bad_cols = csv(write_text, "cols.csv", "sample,group", GOOD_Y1)
    code, _, err = run(capsys, base, tmp_path / "a", bad_cols, y2)
    assert code == 2 and "lacks column 'sample_id'" in err
    assert main(["aggregate", "--input", base, "--output", str(tmp_path / "a"), "--y1", y1]) == 2
    assert "give both --y1 and --y2" in capsys.readouterr().err
