"""benchmarks/cost_model: the per-stage power law and Amdahl's parallel share, on hand-worked runs."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import cost_model  # noqa: E402


def _run(scale, cpus=2, **stages):
    return {"name": f"r{scale}", "scale": scale, "stages": stages, "cpus": cpus}


def test_the_power_law_through_two_runs_and_its_prediction():
    # train: 10 s at 0.05, 40 s at 0.1 -> b = 2, a = 10 / 0.05^2 = 4000; predict: linear
    model = cost_model.fit(
        [_run(0.05, train=10.0, predict=3.0, copied_once=1.0), _run(0.1, train=40.0, predict=6.0)]
    )
    assert set(model) == {"train", "predict"}  # a stage missing from one run is not fitted
    assert model["train"] == {"a": 4000.0, "b": 2.0}
    assert model["predict"] == {"a": 60.0, "b": 1.0}
    assert cost_model.predict(model, 0.3) == pytest.approx({"train": 360.0, "predict": 18.0})


def test_least_squares_on_the_logarithms_of_three_runs():
    # 2 x scale^1.5, the middle run (0.2, the geometric mean of 0.1 and 0.4) 10% slow: on the
    # logarithms the residuals are -d/3, 2d/3, -d/3 (d = log 1.1), so b stays 1.5 and a rises by
    # 1.1^(1/3)
    runs = [_run(s, stage=2 * s**1.5 * f) for s, f in ((0.1, 1.0), (0.2, 1.1), (0.4, 1.0))]
    fitted = cost_model.fit(runs)["stage"]
    assert fitted["b"] == pytest.approx(1.5, abs=1e-3)
    assert fitted["a"] == pytest.approx(2 * 1.1 ** (1 / 3), abs=0.01)


def test_one_scale_is_not_a_fit():
    with pytest.raises(SystemExit):
        cost_model.fit([_run(0.1, s=1.0), _run(0.1, s=2.0)])


def test_amdahl_share_from_local1_and_two_cores():
    # 100 s on one core, 60 s on two: t2 = t1 ((1 - p) + p / 2) -> p = 0.8
    share = cost_model.parallel_share(_run(0.05, cpus=2, s=100.0), _run(0.05, cpus=2, s=60.0))
    assert share["s"] == pytest.approx(0.8)
    # slower on two cores than on one: no parallel share
    assert cost_model.parallel_share(_run(0.05, s=50.0), _run(0.05, s=60.0))["s"] == 0.0
