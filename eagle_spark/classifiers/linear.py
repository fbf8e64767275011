"""Per-label binary linear classifiers on a sparse CSR block, run inside Spark tasks.

L2-regularised squared-hinge loss (Parabel / PECOS default; liblinear's dual coordinate descent
through scikit-learn's ``LinearSVC``) or logistic loss (``LogisticRegression(solver="liblinear")``).
A bias is learned (liblinear appends a constant feature). Weights with |w| below ``threshold``
(Parabel's 0.1 by default) are pruned to bound the model size.

References:
    Prabhu et al., Parabel, WWW 2018, section 3.3; Fan et al., LIBLINEAR, JMLR 2008.
"""

from __future__ import annotations

import functools
import logging
import warnings
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import scipy.sparse as sp

from eagle_spark.errors import check_finite

log = logging.getLogger(__name__)

SCIKIT_LEARN_TESTED = ("1.4", "1.5", "1.6", "1.7", "1.8", "1.9")
"""The scikit-learn minor versions the direct liblinear call was tested with (pyproject.toml pins
the same range); on any version :func:`direct_solver_ok` checks the call before it is used."""


class Liblinear(NamedTuple):
    """scikit-learn's liblinear wrapper, which ``LinearSVC.fit`` / ``LogisticRegression.fit``
    reach once they have validated their input (private: fenced by :func:`direct_solver_ok`)."""

    train: Callable[..., Any]
    """``sklearn.svm._liblinear.train_wrap``"""
    verbosity: Callable[[int], None]
    """``sklearn.svm._liblinear.set_verbosity_wrap``"""
    solver: dict[str, int]
    """liblinear's solver type by loss"""


@functools.lru_cache(maxsize=1)
def _liblinear() -> Optional[Liblinear]:
    """The wrapper, imported at the first fit (a driver that trains nothing does not import
    scikit-learn: ~1.2 s of a command's start); None when this scikit-learn has none."""
    try:
        from sklearn.svm._base import _get_liblinear_solver_type
        from sklearn.svm._liblinear import set_verbosity_wrap, train_wrap

        solver = {
            "squared_hinge": _get_liblinear_solver_type("ovr", "l2", "squared_hinge", True),
            "logistic": _get_liblinear_solver_type("ovr", "l2", "logistic_regression", False),
        }
    except (ImportError, ValueError, TypeError):  # the public estimators then (direct_solver_ok)
        return None
    return Liblinear(train_wrap, set_verbosity_wrap, solver)


_DIRECT_DTYPES = (np.float64, np.float32)
"""Value types of X the direct call takes (float32 converted per fit, as the estimators do)."""

_BOTH_CLASSES = np.ones(2)  # class weights of None: 1 for both classes (compute_class_weight)


@functools.lru_cache(maxsize=64)
def _liblinear_seed(seed: int) -> int:
    """The srand seed scikit-learn's liblinear fits derive from random_state=seed (the same for
    every fit)."""
    return int(np.random.RandomState(seed).randint(np.iinfo("i").max))


def train_binary(
    X: sp.csr_matrix,
    y: np.ndarray,
    loss: str = "squared_hinge",
    C: float = 1.0,
    threshold: float = 0.1,
    max_iter: int = 100,
    tol: float = 0.1,
    seed: int = 0,
    direct: bool = True,
    sample_weight: Optional[np.ndarray] = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Train one binary classifier.

    Args:
        X: (n, d) CSR float64 or float32 features (rows normalised by the caller if wanted;
            finite, which ingest and synth check); float32 is converted to a float64 copy per fit,
            as scikit-learn's estimators convert it.
        y: (n,) bool, True for positives.
        loss: ``squared_hinge`` or ``logistic``.
        C: cost of the loss (inverse regularisation).
        threshold: weights with |w| < threshold are set to 0 (0 keeps all).
        max_iter, tol: liblinear's iteration cap and stopping tolerance.
        seed: liblinear's shuffling seed (its coordinate descent visits samples in random order).
        direct: call scikit-learn's liblinear wrapper (``sklearn.svm._liblinear.train_wrap``)
            with the arguments ``LinearSVC.fit`` / ``LogisticRegression(solver="liblinear").fit``
            prepare once they have validated their input (0/1 targets, class weights of 1, the
            srand seed they draw from `seed`): the same weights bit for bit, without ~1.5 ms of
            per-fit Python, which at Wiki-325K scale is ~1M fits. Used only when
            :func:`direct_solver_ok` (checked once per process) says it matches; otherwise, or
            with False, the public estimators.
        sample_weight: (n,) finite weights >= 0, liblinear's instance weights (sample i's loss
            term costs C x sample_weight[i], as ``LinearSVC.fit(X, y, sample_weight=...)``); None:
            1 for every sample. Weighted assignment (:func:`expected_loss_problem`) passes them.
    Returns:
        (w_idx int32 sorted, w_val float32, bias float): the pruned weight vector and the bias.
        All-positive or all-negative y gives w = 0 and bias +1 / -1 (a constant classifier).
    Raises:
        ValueError: unknown loss; `sample_weight` of another length than y, negative or not finite.
    """
    if loss not in ("squared_hinge", "logistic"):
        raise ValueError(f"loss must be squared_hinge or logistic, got {loss!r}")
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if (
            sample_weight.shape != (len(y),)
            or not np.all(np.isfinite(sample_weight))
            or np.any(sample_weight < 0)
        ):
            raise ValueError(f"sample_weight must be {len(y)} finite values >= 0")
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == len(y):
        return np.zeros(0, np.int32), np.zeros(0, np.float32), 1.0 if n_pos else -1.0
    if direct and X.indices.dtype == np.int32 and X.dtype in _DIRECT_DTYPES and direct_solver_ok():
        # float32 rows become float64 (exactly) here, as the estimators' input check makes them
        X = X if X.dtype == np.float64 else X.astype(np.float64)
        coef, bias = _direct_fit(X, y, loss, C, max_iter, tol, seed, sample_weight)
    else:
        coef, bias = _public_fit(X, y, loss, C, max_iter, tol, seed, sample_weight)
    return _pruned(coef, bias, threshold)


def _direct_fit(
    X: sp.csr_matrix,
    y: np.ndarray,
    loss: str,
    C: float,
    max_iter: int,
    tol: float,
    seed: int,
    sample_weight: Optional[np.ndarray],
) -> tuple[np.ndarray, float]:
    """liblinear through scikit-learn's wrapper with the arguments its estimators prepare: bias
    = intercept_scaling 1, class weights 1, epsilon 0.1 (unused by classifiers), the srand seed
    ``random_state=seed`` gives. Returns (coef (d,), bias)."""
    lib = _liblinear()
    if lib is None:
        raise RuntimeError("scikit-learn has no liblinear wrapper: use _public_fit")
    lib.verbosity(0)  # liblinear's progress lines off (a process-wide flag others may set)
    raw, _ = lib.train(
        X,
        y.astype(np.float64),
        True,
        lib.solver[loss],
        tol,
        1.0,
        C,
        _BOTH_CLASSES,
        max_iter,
        _liblinear_seed(seed),
        0.1,
        np.ones(X.shape[0]) if sample_weight is None else sample_weight,
    )
    return raw[0, :-1], float(raw[0, -1])


def _public_fit(
    X: sp.csr_matrix,
    y: np.ndarray,
    loss: str,
    C: float,
    max_iter: int,
    tol: float,
    seed: int,
    sample_weight: Optional[np.ndarray],
) -> tuple[np.ndarray, float]:
    """``LinearSVC(dual=True)`` (squared hinge) or ``LogisticRegression(solver="liblinear")``
    with the same solver settings. Returns (coef (d,), bias)."""
    from sklearn import config_context
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    with (
        warnings.catch_warnings(),
        config_context(assume_finite=True, skip_parameter_validation=True),
    ):
        warnings.simplefilter("ignore")  # liblinear's ConvergenceWarning at max_iter: expected
        if loss == "squared_hinge":
            model = LinearSVC(
                C=C, loss="squared_hinge", dual=True, tol=tol, max_iter=max_iter, random_state=seed
            )
        else:
            model = LogisticRegression(
                C=C, solver="liblinear", tol=tol, max_iter=max_iter, random_state=seed
            )
        model.fit(X, y, sample_weight=sample_weight)
    return np.asarray(model.coef_, dtype=np.float64).ravel(), float(np.ravel(model.intercept_)[0])


@functools.lru_cache(maxsize=1)
def direct_solver_ok() -> bool:
    """Whether :func:`train_binary`'s direct call to scikit-learn's private liblinear wrapper may
    be used: checked once per Python process (each executor's worker checks for itself) by
    fitting a seeded 60 x 8 problem, both losses, with and without instance weights, both ways
    and requiring the same weights and bias bit for bit. On a missing wrapper, an exception or
    any difference it warns (``RuntimeWarning`` and the log) and returns False: every fit then
    uses the public estimators (same results, ~1.5 ms more per fit). Tested scikit-learn
    versions: :data:`SCIKIT_LEARN_TESTED`.
    """
    import sklearn

    if _liblinear() is None:
        why: str | None = "scikit-learn has no sklearn.svm._liblinear.train_wrap"
    else:
        rng = np.random.default_rng(7)
        X = sp.random(60, 8, density=0.4, format="csr", random_state=7, dtype=np.float64)
        y = rng.random(60) < 0.4
        weights = (None, rng.uniform(0.0, 2.0, 60))
        try:
            same = all(
                _same(
                    _direct_fit(X, y, loss, 0.7, 50, 0.01, 3, w),
                    _public_fit(X, y, loss, 0.7, 50, 0.01, 3, w),
                )
                for loss in ("squared_hinge", "logistic")
                for w in weights
            )
            why = None if same else "it gives other weights than LinearSVC / LogisticRegression"
        except Exception as err:  # noqa: BLE001 - a changed private signature fails in any way
            why = f"it raised {type(err).__name__}: {err}"
    if why is None:
        return True
    msg = (
        f"scikit-learn {sklearn.__version__}: the direct liblinear call is not used ({why}); "
        f"training falls back to the public estimators (same weights, slower). Tested versions: "
        f"{', '.join(SCIKIT_LEARN_TESTED)}"
    )
    warnings.warn(msg, RuntimeWarning, stacklevel=2)
    log.warning(msg)
    return False


def _same(a: tuple[np.ndarray, float], b: tuple[np.ndarray, float]) -> bool:
    return a[0].shape == b[0].shape and bool(np.array_equal(a[0], b[0])) and a[1] == b[1]


def expected_loss_problem(
    X: sp.csr_matrix, y: np.ndarray, w: Optional[np.ndarray]
) -> tuple[sp.csr_matrix, np.ndarray, Optional[np.ndarray]]:
    """One label's binary problem under weighted assignment: the expected loss when positive i is
    truly positive with probability w[i].

    A positive with w[i] = 1, and every negative, is one sample of weight 1 (as without weights);
    a positive with 0 < w[i] < 1 is a positive of weight w[i] plus a copy of its row as a negative
    of weight 1 - w[i], so its loss term is w L(x_i, +1) + (1 - w) L(x_i, -1) (mi-SVM's soft
    labels). At w = 1 for all it is the Baseline's problem, at w in {0, 1} the hard assignment's
    (a weight of 0 is never stored: such a member is a plain negative).

    Args:
        X: (n, d) CSR rows of the problem.
        y: (n,) bool, True for positives.
        w: (n,) float in [0, 1], read at the positives (None: all 1).
    Returns:
        (X', y', sample_weight'): X and y themselves and None when no positive has w < 1, else X
        with the soft positives' rows appended as negatives, and the instance weights; the rows
        held grow by the number of soft positives.
    Source: this project (weighted assignment, beyond the paper's Algorithm 2); the soft-label
    view is mi-SVM's (Andrews, Tsochantaridis, Hofmann, NIPS 2002).
    """
    soft, y2, sample_weight = expected_loss_rows(y, w)
    if len(soft) == 0:
        return X, y, None
    return sp.vstack([X, X[soft]], format="csr"), y2, sample_weight


def expected_loss_rows(
    y: np.ndarray, w: Optional[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """:func:`expected_loss_problem` on row positions, for a caller that gathers the rows itself:
    (soft: the positions (into y's rows, ascending) of the soft positives, whose rows are appended
    as negatives in that order; y'; sample_weight'), y itself and None when `w` is None or no
    positive has w < 1 (soft empty).

    Args:
        y: (n,) bool, True for positives; w: (n,) float in [0, 1], read at the positives (None:
            all 1).
    Returns:
        (soft (m,) int64, y' (n + m,) bool, sample_weight' (n + m,) float64 or None).
    """
    none = np.zeros(0, dtype=np.int64)
    if w is None:
        return none, y, None
    soft = np.flatnonzero(y & (w < 1.0))
    if len(soft) == 0:
        return none, y, None
    weight = np.where(y, w, 1.0)
    return (
        soft,
        np.concatenate((y, np.zeros(len(soft), dtype=bool))),
        np.concatenate((weight, 1.0 - w[soft])),
    )


def check_weights(rows: list, what: str) -> None:
    """Raise :class:`eagle_spark.errors.NumericalError` if a trained classifier has a NaN or
    infinite weight or bias; nothing of the model is committed then.

    Args:
        rows: (id, w_idx, w_val, bias) per classifier, as the training tasks collect them.
        what: names the id in the message (``"train: label"``, ``"train: tree 0, node"``).
    """
    for row in rows:
        check_finite(
            np.concatenate((row[2], [row[3]])),  # (np.r_ costs ~10 us a call, once per label)
            lambda _: (
                f"{what} {int(row[0])}: the trained weights are not finite "
                "(NaN or infinite); check the features and the classifier's C"
            ),
        )


def _pruned(w: np.ndarray, bias: float, threshold: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(w_idx, w_val, bias) of a dense weight vector, weights with |w| < threshold dropped."""
    keep = np.flatnonzero(np.abs(w) >= threshold) if threshold > 0 else np.flatnonzero(w)
    return keep.astype(np.int32), w[keep].astype(np.float32), float(bias)
