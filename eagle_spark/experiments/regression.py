"""Figure 2 of the paper: Theorem 1's regression simulation (section 4 and appendix "Simulations").

The setting, exactly as section 4 states it: n samples in m = n / g groups of g; each group has a
centre xbar_j ~ N(0, sigma_1^2 I_d) and its members x_i = xbar_j + d_i with d_i ~ N(0, sigma_2^2 I_d);
the responses are Z_j = Pi_j (X_j B* + E_j) with E_j's rows ~ N(0, sigma_e^2 I_l), ||B*|| = 1 and
Pi_j an unknown permutation of the group's rows. Two estimators (equation 5):

* **Baseline** (``B_a``): least squares on the group sums, LR({(1^T X_j, 1^T Z_j)}).
* **Assignment** (``B_b``): every response z_i of group j is given to the member
  i' = argmin_{i in N_j} ||z_i - B_a^T x_i||, then LR({(x_i', z_i)}).

Both are reported relative to the maximum-likelihood estimator with the correspondences known
(``B_o`` = LR({(x_i, z_i)}) before the permutation): Rel. RMS = ||B - B*||_F / ||B_o - B*||_F, the
root of the mean square over seeds. Expected shape (the paper's Figure 2 left): the assignment
estimator is much better when sigma_2 is large (heterogeneous groups), slightly worse when the
groups are well clustered (sigma_2 ~ 0).

Everything here is numpy: a simulation, not a Spark job.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

import numpy as np

from eagle_spark.settings import ExperimentSettings


@dataclasses.dataclass(frozen=True)
class RegressionSetting:
    """One simulation setting (defaults: the paper's appendix, "Simulations").

    Attributes:
        g: samples per group (10).
        n: samples (1000; a multiple of g).
        d: feature dimension (10).
        l: response dimension (5).
        sigma1: standard deviation of the group centres (1.0).
        sigma_e: standard deviation of the response noise (1.0).
        sigma2: the within-group deviations to sweep (0 .. 10).
        seeds: independent repetitions per sigma2 (``experiment.seeds``, 10).
    """

    g: int = 10
    n: int = 1000
    d: int = 10
    l: int = 5
    sigma1: float = 1.0
    sigma_e: float = 1.0
    sigma2: tuple[float, ...] = (0.0, 0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0)
    seeds: int = ExperimentSettings().seeds

    def __post_init__(self) -> None:
        for name in ("g", "n", "d", "l", "seeds"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"regression: {name} must be >= 1, got {getattr(self, name)}")
        if self.n % self.g:
            raise ValueError(f"regression: n ({self.n}) must be a multiple of g ({self.g})")
        if self.n // self.g < self.d:
            raise ValueError(
                f"regression: the baseline needs at least d={self.d} groups, "
                f"got n/g={self.n // self.g}"
            )
        for name in ("sigma1", "sigma_e"):
            if not np.isfinite(getattr(self, name)) or getattr(self, name) < 0:
                raise ValueError(f"regression: {name} must be a finite number >= 0")
        object.__setattr__(self, "sigma2", tuple(float(v) for v in self.sigma2))
        if not self.sigma2 or any(not np.isfinite(s) or s < 0 for s in self.sigma2):
            raise ValueError(f"regression: sigma2 must be finite numbers >= 0, got {self.sigma2}")


def least_squares(X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """LR({(x_i, z_i)}) = (sum x x^T)^-1 sum x z^T: the (d, l) minimiser of ||X B - Z||_F."""
    return np.linalg.lstsq(X, Z, rcond=None)[0]


def simulate_once(
    setting: RegressionSetting, sigma2: float, rng: np.random.Generator
) -> dict[str, float]:
    """One draw of the data; returns the estimation errors ||B - B*||_F of the three estimators.

    Returns:
        {"oracle", "baseline", "assignment"}: Frobenius errors (same units as B*, ||B*||_F = 1).
    """
    s = setting
    m = s.n // s.g
    B = rng.standard_normal((s.d, s.l))
    B /= np.linalg.norm(B)
    centres = s.sigma1 * rng.standard_normal((m, s.d))
    X = np.repeat(centres, s.g, axis=0) + sigma2 * rng.standard_normal((s.n, s.d))
    Z_true = X @ B + s.sigma_e * rng.standard_normal((s.n, s.l))
    # the unknown permutation within each group: the observer sees the responses shuffled
    perm = np.concatenate([j * s.g + rng.permutation(s.g) for j in range(m)])
    Z = Z_true[perm]
    B_o = least_squares(X, Z_true)
    X_sum = X.reshape(m, s.g, s.d).sum(axis=1)
    Z_sum = Z.reshape(m, s.g, s.l).sum(axis=1)
    B_a = least_squares(X_sum, Z_sum)
    fitted = (X @ B_a).reshape(m, s.g, 1, s.l)  # member i of group j: B_a^T x_i
    residual = np.linalg.norm(
        Z.reshape(m, 1, s.g, s.l) - fitted, axis=3
    )  # (group, member, response)
    best = residual.argmin(axis=1)  # the member each response goes to
    X_b = X.reshape(m, s.g, s.d)[np.arange(m)[:, None], best].reshape(s.n, s.d)
    B_b = least_squares(X_b, Z)
    return {
        name: float(np.linalg.norm(est - B))
        for name, est in (("oracle", B_o), ("baseline", B_a), ("assignment", B_b))
    }


def simulate(setting: Optional[RegressionSetting] = None, seed: int = 0) -> dict[str, Any]:
    """Run the sweep over sigma2 (Figure 2 left).

    Args:
        setting: the simulation's sizes and noise levels (default: the paper's).
        seed: base seed; draw k of sigma2 index i uses ``[seed, i, k]``.
    Returns:
        {"setting": ..., "rows": [{"sigma2", "baseline_rel_rms", "assignment_rel_rms",
        "baseline_rel_rms_std", "assignment_rel_rms_std", "oracle_rms"}]}: Rel. RMS = the root mean
        square over seeds of an estimator's error divided by that of the oracle; the std is the
        spread of the per-seed ratio.
    Raises:
        ValueError: a bad setting (see :class:`RegressionSetting`).
    """
    setting = setting or RegressionSetting()
    rows = []
    for i, sigma2 in enumerate(setting.sigma2):
        draws = [
            simulate_once(setting, float(sigma2), np.random.default_rng([seed, i, k]))
            for k in range(setting.seeds)
        ]
        err = {
            name: np.array([d[name] for d in draws])
            for name in ("oracle", "baseline", "assignment")
        }
        rms = {name: float(np.sqrt(np.mean(v**2))) for name, v in err.items()}
        rows.append(
            {
                "sigma2": float(sigma2),
                "oracle_rms": rms["oracle"],
                **{
                    f"{name}_rel_rms": rms[name] / rms["oracle"]
                    for name in ("baseline", "assignment")
                },
                **{
                    f"{name}_rel_rms_std": float(np.std(err[name] / err["oracle"]))
                    for name in ("baseline", "assignment")
                },
            }
        )
    return {"setting": dataclasses.asdict(setting), "seed": seed, "rows": rows}


def plot(result: dict[str, Any], path: str) -> None:
    """Figure 2 (left) as a PNG: Rel. RMS of Baseline and Assignment against sigma2 ."""
    from eagle_spark.experiments.figures import new_figure, save_figure

    fig, ax = new_figure(1)
    sig = [r["sigma2"] for r in result["rows"]]
    for key, label, marker in (
        ("baseline", "Baseline (no assignment)", "o"),
        ("assignment", "Assignment (EAGLE)", "s"),
    ):
        mean = np.array([r[f"{key}_rel_rms"] for r in result["rows"]])
        std = np.array([r[f"{key}_rel_rms_std"] for r in result["rows"]])
        ax[0].errorbar(sig, mean, yerr=std, marker=marker, capsize=3, label=label)
    ax[0].axhline(1.0, color="grey", lw=0.8, ls="--", label="oracle (known correspondences)")
    ax[0].set_ylim(bottom=0)
    s = result["setting"]
    ax[0].set_title(
        f"Regression, g={s['g']}, n={s['n']}, d={s['d']}, l={s['l']}, "
        f"$\\sigma_1$={s['sigma1']}, $\\sigma_e$={s['sigma_e']}, {s['seeds']} seeds",
        fontsize=9,
    )
    ax[0].set_xlabel("$\\sigma_2$ (within-group deviation)")
    ax[0].set_ylabel("Rel. RMS (estimator / oracle)")
    ax[0].legend(fontsize=8)
    save_figure(fig, path)


def run(setting: Optional[RegressionSetting], output: str, seed: int = 0) -> dict[str, Any]:
    """Simulate and write ``regression.json`` and ``regression.png`` into the local folder `output`
    and rebuild its ``report.md`` (each file committed atomically). Returns :func:`simulate`'s result.

    Raises:
        ValueError: a bad setting; OSError: `output` cannot be written.
    """
    from eagle_spark.errors import strict_json
    from eagle_spark.experiments.figures import write_text
    from eagle_spark.experiments.report import refresh_local

    result = simulate(setting, seed)
    os.makedirs(output, exist_ok=True)
    write_text(os.path.join(output, "regression.json"), strict_json(result, indent=2) + "\n")
    plot(result, os.path.join(output, "regression.png"))
    refresh_local(output)
    return result


__all__ = [
    "RegressionSetting",
    "least_squares",
    "plot",
    "run",
    "simulate",
    "simulate_once",
]
