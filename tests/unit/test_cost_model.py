"""benchmarks/cost_model: the per-stage power law and Amdahl's parallel share, on hand-worked runs."""

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import cost_model  # noqa: E402


def _run(scale, cpus=2, cpus_used=None, task=None, one_at_a_time=True, **stages):
    return {
        "name": f"r{scale}",
        "scale": scale,
        "stages": stages,
        "task": task or {},
        "cpus": cpus,
        "cpus_used": cpus if cpus_used is None else cpus_used,
        "one_at_a_time": one_at_a_time,
    }


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
    # 100 s on one core (80 task s: 1.25 wall s per task s), 60 s on two: t2 = t1 ((1 - p) + p /
    # 2) -> p = 0.8
    one = _run(0.05, cpus_used=1, task={"s": 80.0}, s=100.0)
    share = cost_model.parallel_share(one, _run(0.05, cpus=2, s=60.0))
    assert share["s"] == pytest.approx({"S": 100 / 60, "p": 0.8, "r": 1.25})
    # slower on two cores than on one: no parallel share
    slow = cost_model.parallel_share(_run(0.05, cpus_used=1, s=50.0), _run(0.05, s=60.0))
    assert slow["s"]["p"] == 0.0


def test_the_speedup_needs_a_local1_run_of_the_same_scale():
    with pytest.raises(SystemExit):
        cost_model.parallel_share(_run(0.05, s=100.0), _run(0.05, s=60.0))  # not local[1]
    with pytest.raises(SystemExit):
        cost_model.parallel_share(_run(0.05, cpus_used=1, s=100.0), _run(0.1, s=60.0))
    with pytest.raises(SystemExit, match="side by side"):  # methods side by side: not a speed-up
        cost_model.parallel_share(
            _run(0.05, cpus_used=1, s=100.0), _run(0.05, one_at_a_time=False, s=60.0)
        )


def test_wall_on_c_cores_from_the_share(tmp_path, monkeypatch):
    # one stage of b = 1: 10 task s at 0.05, 20 at 0.1 -> 200 task s at 1.0; local[1] at 0.05:
    # 12.5 s wall for 10 task s (r = 1.25), local[2]: 7.5 s (p = 0.8); at 1.0 on one core 250 s,
    # on c cores 250 (0.2 + 0.8 / c): 150 on 2, 56.25 on 32
    def report(name, scale, stage_s, task_s, master=None):
        command = "eagle-spark pipeline --set pipeline.methods_at_once=1" + (
            f" --set spark.master=local[{master}]" if master else ""
        )
        rows = [
            {"stage": "whole command", "median s": stage_s + 1, "task s": task_s},
            {"stage": "train", "status": "ran", "median s": stage_s, "task s": task_s},
        ]
        body = {"data": f"synth:wiki325k:{scale}", "command": command, "rows": rows}
        (tmp_path / f"{name}.json").write_text(json.dumps({**body, "machine": {"cpus": 2}}))

    report("a", 0.05, 7.5, 10.0)
    report("b", 0.1, 15.0, 20.0)
    report("one", 0.05, 12.5, 10.0, master=1)
    monkeypatch.setattr(cost_model, "REPORTS", tmp_path)
    written = {}
    monkeypatch.setattr(cost_model, "write_report", lambda n, rows, extra: written.update(extra))
    monkeypatch.setattr(
        sys, "argv", ["cost_model", "--fit", "a", "b", "--speedup", "one", "a", "--cores", "32"]
    )
    cost_model.main()
    full = written["predictions"]["1"]
    assert full["this machine task s"]["train"] == pytest.approx(200.0)
    assert full["2 cores wall s"]["train"] == pytest.approx(150.0)
    assert full["32 cores wall s"]["train"] == pytest.approx(56.2, abs=0.1)
    assert written["speedup"]["whole command speed-up"] == pytest.approx(13.5 / 8.5, abs=1e-3)


def test_the_whole_command_lies_between_the_longest_chain_and_the_stages_summed():
    # shared aggregate 10 s; baseline 30 + 50 = 80 s; eagle 5 + 20 + 40 = 65 s: at least 10 + 80
    # (the methods side by side), at most 10 + 80 + 65 = 155 (one after the other)
    wall = {
        "aggregate": 10.0,
        "train_baseline": 30.0,
        "predict_baseline": 50.0,
        "embed_eagle": 5.0,
        "assign_eagle": 20.0,
        "train_eagle": 40.0,
    }
    assert cost_model.method_of("train_eagle0") == "eagle0"
    assert cost_model.method_of("train_eagle_paper") == "eagle_paper"
    assert cost_model.method_of("aggregate") == ""
    assert cost_model.whole_bounds(wall) == (90.0, 155.0)
    # per stage on c cores from the share: r x work x ((1 - p) + p / c)
    share = {"train_eagle": {"S": 1.6, "p": 0.75, "r": 1.2}}
    on = cost_model.on_cores({"train_eagle": 100.0, "no_share_stage": 5.0}, share, cores=4)
    assert on == {"train_eagle": pytest.approx(120.0 * (0.25 + 0.75 / 4))}
