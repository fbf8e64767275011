"""Vectorised parser of Extreme Classification Repository (XC) and multi-label libsvm lines.

One sample per line::

    l1,l2,...  f:v f:v ...

The label field is the first whitespace-separated token when it contains no ``:``; a line that starts
with a blank (or whose first token holds a ``:``) has no labels. A line of blanks only is rejected
("blank line"): it holds no sample, and a stray empty line would otherwise shift every sample id. Label and feature ids are 0-based
unless ``one_based`` is set, which (like scikit-learn's svmlight reader) shifts feature ids only.

The parser works on a whole Arrow batch of lines at once with pyarrow compute kernels and numpy
(no Python loop over lines or tokens), so it runs at C speed inside Spark's ``mapInArrow``.
Only lines that are bad get a Python-built message.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eagle_spark import schemas as S

_UINT = r"^[0-9]+$"
_NEG_INT = r"^-[0-9]+$"
_FLOAT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_NONFINITE = r"^[+-]?(nan|inf|infinity)$"
_MAX_ID_DIGITS = 10  # ids are int32 in the layout; longer digit strings are out of range anyway
_F32_MAX = float(np.finfo(np.float32).max)

PARSED_ARROW_SCHEMA = pa.schema(
    [
        pa.field(S.FEAT_IDX, S.ARROW_INT_LIST, nullable=False),
        pa.field(S.FEAT_VAL, S.ARROW_FLOAT_LIST, nullable=False),
        pa.field(S.LABEL_IDS, S.ARROW_INT_LIST, nullable=False),
        pa.field(S.REASON, pa.string(), nullable=True),
    ]
)
"""Columns :func:`parse_lines` returns, one row per input line (``reason`` is null on good lines)."""


@dataclass(frozen=True)
class Limits:
    """Bounds a line is checked against.

    Attributes:
        n_features: feature ids must be below this (None: unchecked, e.g. header-less libsvm).
        n_labels: label ids must be below this (None: unchecked).
        one_based: feature ids in the text start at 1; they are stored minus one.
    """

    n_features: int | None = None
    n_labels: int | None = None
    one_based: bool = False


def parse_header(text: str | None) -> tuple[int, int, int]:
    """Parse an XC header line ``n_samples n_features n_labels``.

    Args:
        text: the first line of the file (None for an empty file).
    Returns:
        (n_samples, n_features, n_labels), each >= 0.
    Raises:
        ValueError: the line is missing or is not three non-negative integers (message names the
            problem; the caller adds the file name and line 1).
    """
    if text is None:
        raise ValueError("the file is empty; expected a header 'n_samples n_features n_labels'")
    parts = text.split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(
            f"header must be three non-negative integers 'n_samples n_features n_labels', "
            f"got {text[:80]!r}"
        )
    n_samples, n_features, n_labels = (int(p) for p in parts)
    return n_samples, n_features, n_labels


def _offsets(list_array: pa.ListArray) -> np.ndarray:
    return np.asarray(list_array.offsets, dtype=np.int64)


def _first_error(
    n_lines: int,
    line_of: np.ndarray,
    bad: np.ndarray,
    code: int,
    out: np.ndarray,
    where: np.ndarray,
) -> None:
    """Record `code` for each line that has a bad token and no earlier error; `where` keeps the token."""
    if not bad.any():
        return
    idx = np.flatnonzero(bad)
    lines = line_of[idx]
    # First bad token per line: np.unique returns first occurrence indices on sorted input.
    uniq, first = np.unique(lines, return_index=True)
    fresh = out[uniq] == 0
    out[uniq[fresh]] = code
    where[uniq[fresh]] = idx[first[fresh]]


# Error codes (0 = good line) and their message templates. {tok} is the offending token.
_MESSAGES = {
    1: "missing ':' in feature token {tok!r}",
    2: "non-numeric feature id in {tok!r}",
    3: "negative feature id in {tok!r}",
    4: "non-numeric feature value in {tok!r}",
    5: "NaN or infinite feature value in {tok!r}",
    6: "feature id {tok} is not below n_features={n_features}",
    7: "feature id 0 is invalid with one-based ids",
    8: "duplicate feature id {tok}",
    9: "non-numeric label id {tok!r}",
    10: "negative label id {tok!r}",
    11: "label id {tok} is not below n_labels={n_labels}",
    12: "duplicate label id {tok}",
    13: "empty label id in label field {tok!r}",
    14: "feature value {tok} overflows float32",
    15: "blank line: a sample line needs a label field or features",
}


def _sort_within_lines(
    keys: np.ndarray, line_of: np.ndarray, values: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Sort `keys` (and `values`) by (line, key); `line_of` is non-decreasing. No-op when sorted."""
    if len(keys) < 2:
        return keys, values, line_of
    same_line = line_of[1:] == line_of[:-1]
    if not (same_line & (keys[1:] < keys[:-1])).any():
        return keys, values, line_of
    order = np.lexsort((keys, line_of))
    return keys[order], (None if values is None else values[order]), line_of[order]


def _repeats(keys: np.ndarray, line_of: np.ndarray) -> np.ndarray:
    """Mask of elements equal to their predecessor in the same line (input sorted by line, key)."""
    dup = np.zeros(len(keys), dtype=bool)
    if len(keys) > 1:
        dup[1:] = (line_of[1:] == line_of[:-1]) & (keys[1:] == keys[:-1])
    return dup


def _diagnose(lines: pa.Array, limits: Limits) -> list[str]:
    """Say what is wrong with each of `lines` (lines that failed the fast grammar check).

    Token by token, with a message naming the offending token; slow, so only bad lines come here.
    """
    n_lines = len(lines)
    tokens = pc.ascii_split_whitespace(lines)
    flat = pc.list_flatten(tokens)
    line_of_tok = np.repeat(np.arange(n_lines, dtype=np.int64), np.diff(_offsets(tokens)))
    keep = np.asarray(pc.utf8_length(flat), dtype=np.int64) > 0
    flat = flat.filter(pa.array(keep))
    line_of_tok = line_of_tok[keep]
    n_tok = np.bincount(line_of_tok, minlength=n_lines)
    starts = np.concatenate([[0], np.cumsum(n_tok)[:-1]])
    pos = np.arange(len(flat), dtype=np.int64) - np.repeat(starts, n_tok)
    has_colon = np.asarray(pc.match_substring(flat, ":"), dtype=bool)
    is_label_field = (pos == 0) & ~has_colon

    error = np.zeros(n_lines, dtype=np.int8)
    where = np.zeros(n_lines, dtype=np.int64)
    error_tok: dict[int, pa.Array] = {}

    def check(mask: np.ndarray, code: int, token_array: pa.Array, line_of: np.ndarray) -> None:
        _first_error(n_lines, line_of, mask, code, error, where)
        error_tok.setdefault(code, token_array)

    f_idx = np.flatnonzero(~is_label_field)
    feat_tok = flat.take(pa.array(f_idx, pa.int64()))
    f_line = line_of_tok[f_idx]
    f_colon = has_colon[f_idx]
    check(~f_colon, 1, feat_tok, f_line)
    if len(feat_tok):
        parts = pc.split_pattern(pc.if_else(pa.array(f_colon), feat_tok, "x:x"), ":", max_splits=1)
        id_str, val_str = pc.list_element(parts, 0), pc.list_element(parts, 1)
        id_ok = np.asarray(pc.match_substring_regex(id_str, _UINT), dtype=bool)
        id_neg = np.asarray(pc.match_substring_regex(id_str, _NEG_INT), dtype=bool)
        val_nonfinite = np.asarray(
            pc.match_substring_regex(val_str, _NONFINITE, ignore_case=True), dtype=bool
        )
        val_ok = np.asarray(pc.match_substring_regex(val_str, _FLOAT), dtype=bool)
        check(f_colon & id_neg, 3, feat_tok, f_line)
        check(f_colon & ~id_ok & ~id_neg, 2, feat_tok, f_line)
        check(f_colon & id_ok & val_nonfinite, 5, feat_tok, f_line)
        check(f_colon & id_ok & ~val_ok & ~val_nonfinite, 4, feat_tok, f_line)

    l_idx = np.flatnonzero(is_label_field)
    lab_field = flat.take(pa.array(l_idx, pa.int64()))
    lab_parts = pc.split_pattern(lab_field, ",")
    lab_str = pc.list_flatten(lab_parts)
    l_line = np.repeat(line_of_tok[l_idx], np.diff(_offsets(lab_parts)))
    if len(lab_str):
        field_of = np.repeat(np.arange(len(lab_field)), np.diff(_offsets(lab_parts)))
        l_empty = np.asarray(pc.equal(lab_str, ""), dtype=bool)
        l_neg = np.asarray(pc.match_substring_regex(lab_str, _NEG_INT), dtype=bool)
        l_ok = np.asarray(pc.match_substring_regex(lab_str, _UINT), dtype=bool)
        check(l_empty, 13, lab_field.take(pa.array(field_of, pa.int64())), l_line)
        check(l_neg, 10, lab_str, l_line)
        check(~l_ok & ~l_neg & ~l_empty, 9, lab_str, l_line)

    reasons = []
    for line in range(n_lines):
        code = int(error[line])
        if code == 0:
            reasons.append(f"malformed line {lines[line].as_py()[:80]!r}")
        else:
            tok = error_tok[code][int(where[line])].as_py()
            reasons.append(
                _MESSAGES[code].format(
                    tok=tok, n_features=limits.n_features, n_labels=limits.n_labels
                )
            )
    return reasons


_NUM = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_LINE_GRAMMAR = r"^(?:[0-9]+(?:,[0-9]+)*)?(?:(?:^|[ \t]+)[0-9]+:" + _NUM + r")*$"
_SEPARATORS = bytes.maketrans(b":,", b"  ")


def _per_line_first(
    n_lines: int,
    line_of: np.ndarray,
    bad: np.ndarray,
    values: np.ndarray,
    code: int,
    error: np.ndarray,
    value_at: np.ndarray,
) -> None:
    """Record `code` and the offending value for lines with a bad element and no earlier error."""
    if not bad.any():
        return
    idx = np.flatnonzero(bad)
    uniq, first = np.unique(line_of[idx], return_index=True)
    fresh = error[uniq] == 0
    error[uniq[fresh]] = code
    value_at[uniq[fresh]] = values[idx[first[fresh]]]


def parse_lines(lines: pa.Array, limits: Limits) -> pa.RecordBatch:
    """Parse XC / libsvm multi-label lines into sorted sparse rows.

    Fast path: each line is matched once against the line grammar (RE2, linear time); on lines that
    match, ``:`` and ``,`` become blanks in the Arrow data buffer, every token is cast to float64 in
    one kernel, and labels, feature ids and values are told apart by position. Range, duplicate and
    float32-overflow checks are numpy-vectorised. Lines that fail the grammar are diagnosed token by
    token (slow, but only for bad lines).

    Args:
        lines: pyarrow string array, one sample per element (no header line).
        limits: id bounds and the one-based flag.
    Returns:
        RecordBatch with :data:`PARSED_ARROW_SCHEMA`, one row per line: ``feat_idx`` (int32, sorted,
        unique), ``feat_val`` (float32, finite), ``label_ids`` (int32, sorted, unique) and ``reason``
        (null for a good line; else what is wrong, and the line's lists are empty).
    Raises:
        Nothing for bad lines: they are reported in ``reason``.
    """
    n_lines = len(lines)
    text = pc.ascii_trim_whitespace(pc.fill_null(pc.cast(lines, pa.string()), ""))
    grammar_ok = np.asarray(pc.match_substring_regex(text, _LINE_GRAMMAR), dtype=bool)
    error = np.zeros(n_lines, dtype=np.int8)
    value_at = np.zeros(n_lines, dtype=np.float64)

    ok_idx = np.flatnonzero(grammar_ok)
    good = text if len(ok_idx) == n_lines else text.take(pa.array(ok_idx, pa.int64()))
    n_colon = np.asarray(pc.count_substring(good, ":"), dtype=np.int64)
    validity, offsets, data = good.buffers()
    swapped = pa.StringArray.from_buffers(
        len(good),
        offsets,
        pa.py_buffer((data.to_pybytes() if data else b"").translate(_SEPARATORS)),
        validity,
        0,
        good.offset,
    )
    tokens = pc.ascii_split_whitespace(swapped)
    n_tok = np.diff(_offsets(tokens))
    flat = pc.list_flatten(tokens)
    empty = np.asarray(pc.utf8_length(good), dtype=np.int64) == 0
    if empty.any():  # an empty string splits into one empty token
        flat = flat.filter(pa.array(np.repeat(~empty, n_tok)))
        n_tok = np.where(empty, 0, n_tok)
    numbers = (
        np.asarray(pc.cast(flat, pa.float64()), dtype=np.float64) if len(flat) else np.zeros(0)
    )
    n_lab = n_tok - 2 * n_colon
    # Token positions by arithmetic: in line L (token start s, first feature f), feature m's id is
    # token s + n_lab + 2m, its value the next one; label m is token s + m.
    tok_start = np.zeros(len(n_tok), dtype=np.int64)
    np.cumsum(n_tok[:-1], out=tok_start[1:])
    feat_start = np.zeros(len(n_colon), dtype=np.int64)
    np.cumsum(n_colon[:-1], out=feat_start[1:])
    lab_start = np.zeros(len(n_lab), dtype=np.int64)
    np.cumsum(n_lab[:-1], out=lab_start[1:])
    id_pos = 2 * np.arange(int(n_colon.sum()), dtype=np.int64)
    id_pos += np.repeat(tok_start + n_lab - 2 * feat_start, n_colon)
    lab_pos = np.arange(int(n_lab.sum()), dtype=np.int64)
    lab_pos += np.repeat(tok_start - lab_start, n_lab)
    ids, vals = numbers[id_pos], numbers[id_pos + 1]
    labels = numbers[lab_pos]
    f_line = np.repeat(ok_idx, n_colon)
    l_line = np.repeat(ok_idx, n_lab)

    # Value checks first, then ids; the first problem of a line is the one reported.
    _per_line_first(n_lines, f_line, np.abs(vals) > _F32_MAX, vals, 14, error, value_at)
    if limits.one_based:
        _per_line_first(n_lines, f_line, ids == 0, ids, 7, error, value_at)
        ids = ids - 1
    if limits.n_features is not None:
        _per_line_first(n_lines, f_line, ids >= limits.n_features, ids, 6, error, value_at)
    if limits.n_labels is not None:
        _per_line_first(n_lines, l_line, labels >= limits.n_labels, labels, 11, error, value_at)
    ids, sorted_vals, f_line = _sort_within_lines(ids, f_line, vals)
    vals = vals if sorted_vals is None else sorted_vals
    _per_line_first(n_lines, f_line, _repeats(ids, f_line), ids, 8, error, value_at)
    labels, _, l_line = _sort_within_lines(labels, l_line, None)
    _per_line_first(n_lines, l_line, _repeats(labels, l_line), labels, 12, error, value_at)

    # A line of blanks only (not a header replaced by null): no sample, most likely a stray newline.
    blank = np.asarray(pc.and_(pc.is_valid(lines), pc.equal(text, "")), dtype=bool)
    error[blank & (error == 0)] = 15

    reasons: list[str | None] = [None] * n_lines
    bad_grammar = np.flatnonzero(~grammar_ok)
    if len(bad_grammar):
        for line, reason in zip(bad_grammar, _diagnose(text.take(pa.array(bad_grammar)), limits)):
            reasons[line] = reason
    for line in np.flatnonzero(error):
        value = value_at[line]
        tok = (
            f"{value:g}"
            if int(error[line]) == 14
            else str(int(value))
            if np.isfinite(value)
            else ""
        )
        reasons[line] = _MESSAGES[int(error[line])].format(
            tok=tok, n_features=limits.n_features, n_labels=limits.n_labels
        )

    bad_line = ~grammar_ok | (error > 0)
    keep_f = ~bad_line[f_line]
    keep_l = ~bad_line[l_line]
    f_counts = np.bincount(f_line[keep_f], minlength=n_lines)
    l_counts = np.bincount(l_line[keep_l], minlength=n_lines)
    f_offsets = np.zeros(n_lines + 1, dtype=np.int32)
    np.cumsum(f_counts, out=f_offsets[1:])
    l_offsets = np.zeros(n_lines + 1, dtype=np.int32)
    np.cumsum(l_counts, out=l_offsets[1:])
    feat_idx = pa.ListArray.from_arrays(
        pa.array(f_offsets), pa.array(ids[keep_f].astype(np.int32)), type=S.ARROW_INT_LIST
    )
    feat_val = pa.ListArray.from_arrays(
        pa.array(f_offsets), pa.array(vals[keep_f].astype(np.float32)), type=S.ARROW_FLOAT_LIST
    )
    label_ids = pa.ListArray.from_arrays(
        pa.array(l_offsets), pa.array(labels[keep_l].astype(np.int32)), type=S.ARROW_INT_LIST
    )
    return pa.RecordBatch.from_arrays(
        [feat_idx, feat_val, label_ids, pa.array(reasons, pa.string())], schema=PARSED_ARROW_SCHEMA
    )
