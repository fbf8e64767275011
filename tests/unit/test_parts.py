"""Reading tables of sparse rows (weights, label embeddings) into CSR: hand-worked cases and errors."""

import pathlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eagle_spark.io.parts import read_sparse_rows


def _write(path, keys, idx, val, bias=None):
    path.mkdir(parents=True, exist_ok=True)
    cols = {
        "label_id": pa.array(keys, pa.int32()),
        "w_idx": pa.array(idx, pa.list_(pa.int32())),
        "w_val": pa.array(val, pa.list_(pa.float32())),
    }
    if bias is not None:
        cols["bias"] = pa.array(bias, pa.float64())
    pq.write_table(pa.table(cols), path / "part-00000.parquet")
    return str(path)


def test_rows_in_any_order_missing_rows_empty(tmp_path):
    folder = _write(
        tmp_path / "w", [3, 0, 1], [[2], [0, 4], []], [[0.5], [1.0, -2.0], []], [0.25, -1.0, 2.0]
    )
    M, bias = read_sparse_rows(
        folder, "label_id", "w_idx", "w_val", (5, 6), extra="bias", dtype=np.float32
    )
    assert M.dtype == np.float32 and M.shape == (5, 6)
    assert M.toarray().tolist() == [
        [1.0, 0, 0, 0, -2.0, 0],
        [0] * 6,
        [0] * 6,
        [0, 0, 0.5, 0, 0, 0],
        [0] * 6,
    ]
    assert bias.tolist() == [-1.0, 2.0, 0.0, 0.25, 0.0]
    M64, none = read_sparse_rows(folder, "label_id", "w_idx", "w_val", (5, 6))
    assert M64.dtype == np.float64 and none is None and (M64 != M).nnz == 0


@pytest.mark.parametrize(
    "keys,idx,message",
    [
        ([0, 0], [[1], [2]], "label_id 0 appears in more than one row"),
        ([0, 4], [[1], [2]], r"label_id 4 is outside \[0, 4\)"),
        ([0, 1], [[1], [6]], r"index 6 is outside \[0, 6\)"),
        ([0, 1], [[1], [-1]], r"index -1 is outside \[0, 6\)"),
        ([0, 1], [[1, 2], [3]], "w_idx and w_val have different list lengths"),
    ],
)
def test_bad_tables_name_the_folder_and_the_problem(tmp_path, keys, idx, message):
    folder = _write(tmp_path / "bad", keys, idx, [[1.0]] * len(keys))
    with pytest.raises(ValueError, match=message) as err:
        read_sparse_rows(folder, "label_id", "w_idx", "w_val", (4, 6))
    assert folder in str(err.value)


@pytest.mark.parametrize(
    "idx,message",
    [
        ([[0, 2], [-1]], r"feat_idx index -1 is outside \[0, 3\)"),
        ([[0, 2], [3]], r"feat_idx index 3 is outside \[0, 3\)"),
        ([[0, 2], [1, 2]], "feat_idx and feat_val have different list lengths"),
    ],
)
def test_csr_from_arrow_rejects_bad_lists(idx, message):
    from eagle_spark.sparse import csr_from_arrow

    vals = pa.array([[1.0, 2.0], [3.0]], pa.list_(pa.float32()))
    with pytest.raises(ValueError, match=message):
        csr_from_arrow(pa.array(idx, pa.list_(pa.int32())), vals, 3)
    M = csr_from_arrow(pa.array([[0, 2], [1]], pa.list_(pa.int32())), vals, 3)
    assert M.dtype == np.float32 and M.toarray().tolist() == [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]


def dictionary_columns(folder):
    """{part file name: columns with dictionary pages} over the Parquet part files under `folder`."""
    parts = sorted(pathlib.Path(folder).rglob("part-*.parquet"))
    if not parts:
        raise FileNotFoundError(f"no part files under {folder}")
    out = {}
    for p in parts:
        meta = pq.ParquetFile(p).metadata
        out[str(p.relative_to(folder))] = sorted(
            {
                meta.schema.column(c).path
                for g in range(meta.num_row_groups)
                for c in range(meta.num_columns)
                if {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
                & set(meta.row_group(g).column(c).encodings)
            }
        )
    return out


@pytest.mark.parametrize("dictionary", [True, False])
def test_part_writers_dictionary_option(tmp_path, dictionary):
    from eagle_spark.io.parts import PartWriters

    schema = pa.schema([("k", pa.int32()), ("v", pa.list_(pa.float32()))])
    with PartWriters(str(tmp_path), {"t": schema}, dictionary=dictionary) as writers:
        writers.name("part-00000.parquet")
        writers.write(
            "t",
            pa.record_batch(
                [
                    pa.array([1, 1, 2], pa.int32()),
                    pa.array([[0.5], [0.5, 0.25], []], pa.list_(pa.float32())),
                ],
                schema=schema,
            ),
        )
    assert pq.read_table(tmp_path / "t" / "part-00000.parquet").to_pydict() == {
        "k": [1, 1, 2],
        "v": [[0.5], [0.5, 0.25], []],
    }
    assert dictionary_columns(tmp_path / "t") == {
        "part-00000.parquet": ["k", "v.list.element"] if dictionary else []
    }
