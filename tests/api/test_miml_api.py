"""The MIML network as a pyspark.ml Estimator / Model (:mod:`eagle_spark.ml.miml`): the bags a frame
holds (hand-worked), the numpy forward pass of a bag of one against the PyTorch network, fit on a
frame against training the same bags directly, the eagle0 mask's embeddings against a numpy twin,
transform, save / load (checked on read) and a pyspark.ml Pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from eagle_spark.data import mnist_sample
from eagle_spark.errors import BadInputError
from eagle_spark.miml.data import Bags, centre, load_mnist, make_bags

torch = pytest.importorskip("torch", reason="the [miml] extra (PyTorch) is not installed")

SMALL = dict(hidden=16, concepts=2, epochs=2, batchSize=8, seed=3)


def _frame(spark, x: np.ndarray, bags: Bags, names=None):
    """One row per instance: its features, its bag's name and the bag's labels with repeats."""
    from pyspark.ml.linalg import Vectors

    rows = []
    for b, (members, counts) in enumerate(zip(bags.members, bags.counts, strict=True)):
        labels = [int(k) for k in np.repeat(np.arange(len(counts)), counts)]
        for i in members:
            name = names[b] if names is not None else f"bag-{b:04d}"
            rows.append((int(i), name, Vectors.dense(x[i].tolist()), labels))
    return spark.createDataFrame(rows, ["image", "group_id", "features", "group_labels"])


def test_collect_bags_hand_worked_and_bad_bags(spark):
    from pyspark.ml.linalg import Vectors

    from eagle_spark.ml.miml import collect_bags

    v = Vectors.dense
    df = spark.createDataFrame(
        [
            ("b", v([3.0, 0.0]), [2, 0]),
            ("a", v([1.0, 0.0]), [1, 1]),
            ("b", v([4.0, 1.0]), [0, 2]),
            ("a", v([2.0, 0.0]), [1, 1]),
            (None, v([9.0, 9.0]), [0]),
        ],
        ["group_id", "features", "group_labels"],
    )
    x, bags = collect_bags(df, "features", "group_id", "group_labels")
    assert bags.members.tolist() == [[0, 1], [2, 3]]  # bags by name: a, then b
    assert bags.counts.tolist() == [[0, 2, 0], [1, 0, 1]]
    assert sorted(x[:2, 0].tolist()) == [1.0, 2.0] and sorted(x[2:, 0].tolist()) == [3.0, 4.0]
    _, wider = collect_bags(df, "features", "group_id", "group_labels", n_labels=5)
    assert wider.counts.shape == (2, 5)

    odd = df.union(spark.createDataFrame([("c", v([0.0, 1.0]), [1])], df.schema))
    with pytest.raises(ValueError, match="bag 'c' holds 1, most hold 2"):
        collect_bags(odd, "features", "group_id", "group_labels")
    two = spark.createDataFrame([("a", v([1.0, 0.0]), [1]), ("a", v([2.0, 0.0]), [0])], df.schema)
    with pytest.raises(
        ValueError, match=r"members of bag 'a' disagree on its labels \(\[1\] and \[0\]\)"
    ):
        collect_bags(two, "features", "group_id", "group_labels")
    empty = spark.createDataFrame([("a", v([1.0, 0.0]), [])], df.schema)
    with pytest.raises(ValueError, match="bag 'a' has no label"):
        collect_bags(empty, "features", "group_id", "group_labels")
    with pytest.raises(ValueError, match=r"label id 2, outside \[0, 2\)"):
        collect_bags(df, "features", "group_id", "group_labels", n_labels=2)
    with pytest.raises(ValueError, match="no group column 'bag'"):
        collect_bags(df, "features", "bag", "group_labels")


@pytest.mark.parametrize("mask_mix", [None, 0.5])
def test_bag_of_one_logits_equal_the_torch_network(mask_mix):
    """A bag of one has mask 1 (g softmax over one instance; M' = (1 - a) + a M / M): the numpy
    forward pass equals DeepMIML's, mask and all."""
    from eagle_spark.miml.network import DeepMIML as Net
    from eagle_spark.miml.network import state_numpy
    from eagle_spark.ml.miml import bag_of_one_logits

    rng = np.random.default_rng(0)
    emb = rng.normal(size=(5, 7)).astype(np.float32)
    torch.manual_seed(0)
    net = Net(7, 5, hidden=6, concepts=3, label_emb=emb, tau=4.0, mask_mix=mask_mix)
    x = rng.normal(size=(11, 7)).astype(np.float32)
    with torch.no_grad():
        want = net(torch.as_tensor(x).unsqueeze(1)).numpy()
    got = bag_of_one_logits(state_numpy(net), x, concepts=3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fit_on_a_frame_equals_training_its_bags_and_persists(spark, tmp_path):
    """deep-miml fitted on a frame of bags has the parameters of train_bags on the same bags (in
    the frame's bag order) and the same history; transform predicts the argmax of the numpy
    forward pass; save / load keeps the network, the Params and the predictions; a saved model
    whose network is altered is refused."""
    from pyspark.ml import Pipeline, PipelineModel

    from eagle_spark.miml.training import NetConfig, train_bags
    from eagle_spark.ml.miml import DeepMIML, DeepMIMLModel, bag_of_one_logits

    train, _ = load_mnist(mnist_sample())
    x = centre(train.x[:96])[0]
    bags = make_bags(train.y[:96], 4, seed=0)
    df = _frame(spark, x, bags)
    model = DeepMIML(method="deep-miml", **SMALL).fit(df)

    order = df.orderBy("group_id", "image").select("image").toPandas()["image"].to_numpy()
    # collect_bags keeps each bag's members together in the bag order: the same bags over x[order]
    x_frame = x[order]
    counts = bags.counts[np.argsort([f"bag-{b:04d}" for b in range(len(bags.members))])]
    members = np.arange(len(order)).reshape(-1, 4)
    want, hist = train_bags(
        x_frame,
        Bags(members, counts),
        NetConfig(hidden=16, concepts=2, epochs=2, batch_size=8, seed=3),
    )
    got = model.state()
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    assert [h["loss"] for h in model.history] == pytest.approx([h["loss"] for h in hist])
    assert model.history[0]["val_accuracy"] is None

    scored = model.transform(df).orderBy("image").toPandas()
    logits = bag_of_one_logits(got, x, concepts=2)
    np.testing.assert_allclose(np.stack(scored["scores"].to_numpy()), logits, rtol=1e-5, atol=1e-5)
    assert scored["prediction"].tolist() == logits.argmax(axis=1).astype(float).tolist()
    assert {"image", "group_id", "features", "group_labels"} <= set(scored.columns)

    path = str(tmp_path / "model")
    model.save(path)
    loaded = DeepMIMLModel.load(path)
    assert loaded.getOrDefault("method") == "deep-miml" and loaded.getOrDefault("hidden") == 16
    again = loaded.transform(df).orderBy("image").toPandas()
    assert again["prediction"].tolist() == scored["prediction"].tolist()
    with pytest.raises(ValueError, match="already has a column 'scores'"):
        loaded.transform(loaded.transform(df))

    pipe = Pipeline(stages=[DeepMIML(method="deep-miml", **SMALL)]).fit(df)
    pipe.write().overwrite().save(str(tmp_path / "pipeline"))
    back = PipelineModel.load(str(tmp_path / "pipeline"))
    piped = back.transform(df).orderBy("image").toPandas()
    assert piped["prediction"].tolist() == scored["prediction"].tolist()

    network = tmp_path / "model" / "data" / "network.npz"
    network.write_bytes(network.read_bytes()[:-7] + b"garbage")
    with pytest.raises(BadInputError, match="network.npz"):
        DeepMIMLModel.load(path).transform(df)


def test_eagle0_mask_embeddings_equal_a_count_weighted_twin(spark):
    """eagle0's mask: GRLR at T = 0 on the bags' list merge, Proj(sum over bags of count_k x the
    bag's normalised instances), then centred (rows minus their mean, unit length), computed here
    directly; the fitted network holds them as its label_emb buffer."""
    from eagle_spark.ml.miml import DeepMIML

    train, _ = load_mnist(mnist_sample())
    x = centre(train.x[:80])[0]
    bags = make_bags(train.y[:80], 8, seed=1)
    df = _frame(spark, x, bags)
    model = DeepMIML(method="eagle0", **SMALL).fit(df)
    emb = model.state()["label_emb"]
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    raw = np.zeros((10, x.shape[1]))
    for members, counts in zip(bags.members, bags.counts, strict=True):
        raw += counts[:, None] * xn[members].sum(axis=0)[None, :]
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    c = raw - raw.mean(axis=0)
    want = c / np.linalg.norm(c, axis=1, keepdims=True)
    np.testing.assert_allclose(emb, want, atol=1e-5)


def test_bad_params_are_refused_before_any_job(spark):
    from pyspark.ml.linalg import Vectors

    from eagle_spark.ml.miml import DeepMIML

    df = spark.createDataFrame(
        [("a", Vectors.dense([1.0]), [0])], ["group_id", "features", "group_labels"]
    )
    with pytest.raises(ValueError, match="DeepMIML: method must be deep-miml, eagle0 or eagle"):
        DeepMIML(method="mil").fit(df)
    with pytest.raises(ValueError, match="DeepMIML: learningRate must be a finite number > 0"):
        DeepMIML(learningRate=0.0).fit(df)
    with pytest.raises(ValueError, match="DeepMIML: maskMix must be in"):
        DeepMIML(maskMix=2.0).fit(df)
