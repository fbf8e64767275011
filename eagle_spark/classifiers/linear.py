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
import warnings
from typing import Optional

import numpy as np
import scipy.sparse as sp

from eagle_spark.errors import check_finite


try:  # the solver call LinearSVC.fit / LogisticRegression.fit make after validating their input
    from sklearn.svm._base import _fit_liblinear
except ImportError:  # pragma: no cover - a scikit-learn without it: the public estimators
    _fit_liblinear = None

try:  # the liblinear wrapper _fit_liblinear calls once it has prepared its arguments
    from sklearn.svm._base import _get_liblinear_solver_type
    from sklearn.svm._liblinear import set_verbosity_wrap as _set_verbosity
    from sklearn.svm._liblinear import train_wrap as _train_wrap

    _SOLVER = {"squared_hinge": _get_liblinear_solver_type("ovr", "l2", "squared_hinge", True),
               "logistic": _get_liblinear_solver_type("ovr", "l2", "logistic_regression", False)}
except (ImportError, ValueError):  # pragma: no cover - then _fit_liblinear or the estimators
    _train_wrap = None

_BOTH_CLASSES = np.ones(2)  # class weights of None: 1 for both classes (compute_class_weight)


@functools.lru_cache(maxsize=64)
def _liblinear_seed(seed: int) -> int:
    """The srand seed _fit_liblinear derives from random_state=seed (the same for every fit)."""
    return int(np.random.RandomState(seed).randint(np.iinfo("i").max))


def train_binary(X: sp.csr_matrix, y: np.ndarray, loss: str = "squared_hinge", C: float = 1.0,
                 threshold: float = 0.1, max_iter: int = 100, tol: float = 0.1,
                 seed: int = 0, direct: bool = True,
                 sample_weight: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Train one binary classifier.

    Args:
        X: (n, d) CSR float64 features (rows normalised by the caller if wanted; finite, which
            ingest and synth check).
        y: (n,) bool, True for positives.
        loss: ``squared_hinge`` or ``logistic``.
        C: cost of the loss (inverse regularisation).
        threshold: weights with |w| < threshold are set to 0 (0 keeps all).
        max_iter, tol: liblinear's iteration cap and stopping tolerance.
        seed: liblinear's shuffling seed (its coordinate descent visits samples in random order).
        direct: call scikit-learn's liblinear wrapper (``sklearn.svm._liblinear.train_wrap``)
            with the arguments ``_fit_liblinear`` (what ``LinearSVC.fit`` and
            ``LogisticRegression(solver="liblinear").fit`` call once they have validated their
            input) would prepare: 0/1 targets, class and sample weights of 1, the srand seed it
            draws from `seed`. Same weights bit for bit as the estimators (tested); it skips
            ~1.5 ms of per-fit Python (label encoding, weight arrays, a RandomState per fit,
            input checks), which at Wiki-325K scale is ~1M fits. Falls back to
            ``_fit_liblinear``, then the estimators, when scikit-learn lacks the functions.
        sample_weight: (n,) finite weights >= 0, liblinear's instance weights (sample i's loss
            term costs C x sample_weight[i], as ``LinearSVC.fit(X, y, sample_weight=...)``); None:
            1 for every sample. Weighted assignment (:func:`expected_loss_problem`) passes them.
    Returns:
        (w_idx int32 sorted, w_val float32, bias float): the pruned weight vector and the bias.
        All-positive or all-negative y gives w = 0 and bias +1 / -1 (a constant classifier).
    Raises:
        ValueError: unknown loss; `sample_weight` of another length than y, negative or not finite.
    """
    from sklearn import config_context

    if loss not in ("squared_hinge", "logistic"):
        raise ValueError(f"loss must be squared_hinge or logistic, got {loss!r}")
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != (len(y),) or not np.all(np.isfinite(sample_weight)) \
                or np.any(sample_weight < 0):
            raise ValueError(f"sample_weight must be {len(y)} finite values >= 0")
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == len(y):
        return np.zeros(0, np.int32), np.zeros(0, np.float32), 1.0 if n_pos else -1.0
    if direct and _train_wrap is not None and X.indices.dtype == np.int32 and X.dtype == np.float64:
        # _fit_liblinear's call: bias = intercept_scaling 1, epsilon 0.1 (unused by classifiers)
        _set_verbosity(0)  # liblinear's progress lines off (a process-wide flag others may set)
        raw, _ = _train_wrap(X, y.astype(np.float64), True, _SOLVER[loss], tol, 1.0, C, _BOTH_CLASSES,
                             max_iter, _liblinear_seed(seed), 0.1,
                             np.ones(X.shape[0]) if sample_weight is None else sample_weight)
        return _pruned(raw[0, :-1], raw[0, -1], threshold)
    with warnings.catch_warnings(), config_context(assume_finite=True, skip_parameter_validation=True):
        warnings.simplefilter("ignore")  # liblinear's ConvergenceWarning at max_iter: expected
        if direct and _fit_liblinear is not None:
            if loss == "squared_hinge":  # LinearSVC(dual=True) defaults: l2 penalty, intercept 1
                coef, intercept, _ = _fit_liblinear(X, y, C, True, 1.0, None, "l2", True, 0, max_iter,
                                                    tol, seed, "ovr", "squared_hinge",
                                                    sample_weight=sample_weight)
            else:  # LogisticRegression(solver="liblinear") defaults: primal, l2, intercept 1
                coef, intercept, _ = _fit_liblinear(X, y, C, True, 1.0, None, "l2", False, 0, max_iter,
                                                    tol, seed, sample_weight=sample_weight)
        else:
            from sklearn.linear_model import LogisticRegression
            from sklearn.svm import LinearSVC
            if loss == "squared_hinge":
                model = LinearSVC(C=C, loss="squared_hinge", dual=True, tol=tol, max_iter=max_iter,
                                  random_state=seed)
            else:
                model = LogisticRegression(C=C, solver="liblinear", tol=tol, max_iter=max_iter,
                                           random_state=seed)
            model.fit(X, y, sample_weight=sample_weight)
            coef, intercept = model.coef_, model.intercept_
    return _pruned(np.asarray(coef).ravel(), np.ravel(intercept)[0], threshold)


def expected_loss_problem(X: sp.csr_matrix, y: np.ndarray, w: Optional[np.ndarray]
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
    if w is None:
        return X, y, None
    soft = np.flatnonzero(y & (w < 1.0))
    if len(soft) == 0:
        return X, y, None
    weight = np.where(y, w, 1.0)
    return (sp.vstack([X, X[soft]], format="csr"), np.r_[y, np.zeros(len(soft), dtype=bool)],
            np.r_[weight, 1.0 - w[soft]])


def check_weights(rows: list, what: str) -> None:
    """Raise :class:`eagle_spark.errors.NumericalError` if a trained classifier has a NaN or
    infinite weight or bias; nothing of the model is committed then.

    Args:
        rows: (id, w_idx, w_val, bias) per classifier, as the training tasks collect them.
        what: names the id in the message (``"train: label"``, ``"train: tree 0, node"``).
    """
    for row in rows:
        check_finite(np.r_[row[2], row[3]],
                     lambda _, r=row: f"{what} {int(r[0])}: the trained weights are not finite "
                                      "(NaN or infinite); check the features and the classifier's C")


def _pruned(w: np.ndarray, bias: float, threshold: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(w_idx, w_val, bias) of a dense weight vector, weights with |w| < threshold dropped."""
    keep = np.flatnonzero(np.abs(w) >= threshold) if threshold > 0 else np.flatnonzero(w)
    return keep.astype(np.int32), w[keep].astype(np.float32), float(bias)
