"""Per-label binary linear classifiers on a sparse CSR block, run inside Spark tasks.

L2-regularised squared-hinge loss (Parabel / PECOS default; liblinear's dual coordinate descent
through scikit-learn's ``LinearSVC``) or logistic loss (``LogisticRegression(solver="liblinear")``).
A bias is learned (liblinear appends a constant feature). Weights with |w| below ``threshold``
(Parabel's 0.1 by default) are pruned to bound the model size.

References:
    Prabhu et al., Parabel, WWW 2018, section 3.3; Fan et al., LIBLINEAR, JMLR 2008.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp


def train_binary(X: sp.csr_matrix, y: np.ndarray, loss: str = "squared_hinge", C: float = 1.0,
                 threshold: float = 0.1, max_iter: int = 100, tol: float = 0.1,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """Train one binary classifier.

    Args:
        X: (n, d) CSR features (rows normalised by the caller if wanted).
        y: (n,) bool, True for positives.
        loss: ``squared_hinge`` or ``logistic``.
        C: cost of the loss (inverse regularisation).
        threshold: weights with |w| < threshold are set to 0 (0 keeps all).
        max_iter, tol: liblinear's iteration cap and stopping tolerance.
        seed: liblinear's shuffling seed (its coordinate descent visits samples in random order).
    Returns:
        (w_idx int32 sorted, w_val float32, bias float): the pruned weight vector and the bias.
        All-positive or all-negative y gives w = 0 and bias +1 / -1 (a constant classifier).
    Raises:
        ValueError: unknown loss.
    """
    from sklearn import config_context
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    if loss not in ("squared_hinge", "logistic"):
        raise ValueError(f"loss must be squared_hinge or logistic, got {loss!r}")
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == len(y):
        return np.zeros(0, np.int32), np.zeros(0, np.float32), 1.0 if n_pos else -1.0
    if loss == "squared_hinge":
        model = LinearSVC(C=C, loss="squared_hinge", dual=True, tol=tol, max_iter=max_iter,
                          random_state=seed)
    else:
        model = LogisticRegression(C=C, solver="liblinear", tol=tol, max_iter=max_iter,
                                   random_state=seed)
    with warnings.catch_warnings(), config_context(assume_finite=True):  # X checked at ingest
        warnings.simplefilter("ignore")  # liblinear's ConvergenceWarning at max_iter: expected
        model.fit(X, y)
    w = model.coef_.ravel()
    keep = np.flatnonzero(np.abs(w) >= threshold) if threshold > 0 else np.flatnonzero(w)
    return keep.astype(np.int32), w[keep].astype(np.float32), float(model.intercept_[0])
