"""The MIML extension (paper section 5): IDX reading, bags, the co-attention mask and the
networks against hand-worked values and numpy twins, the bags and GRLR embeddings on Spark against
an independent count-weighted twin, TorchDistributor against single-process training."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from eagle_spark.data import mnist_sample
from eagle_spark.errors import BadInputError
from eagle_spark.miml.data import Bags, centre, load_mnist, make_bags, read_idx

torch = pytest.importorskip("torch", reason="the [miml] extra (PyTorch) is not installed")


def _idx(dims: list[int], body: bytes, magic: int) -> bytes:
    return magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in dims) + body


def test_read_idx_plain_gzip_and_bad_files(tmp_path):
    body = bytes(range(8))
    (tmp_path / "i.idx").write_bytes(_idx([2, 2, 2], body, 0x803))
    with gzip.open(tmp_path / "l.idx.gz", "wb") as fh:
        fh.write(_idx([3], bytes([7, 0, 9]), 0x801))
    assert read_idx(str(tmp_path / "i.idx")).tolist() == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    assert read_idx(str(tmp_path / "l.idx.gz")).tolist() == [7, 0, 9]
    (tmp_path / "bad.idx").write_bytes(_idx([2], b"\x00\x01", 0x0D03))
    with pytest.raises(
        BadInputError, match=r"bad.idx: magic number 0x00000d03 is not an IDX uint8"
    ):
        read_idx(str(tmp_path / "bad.idx"))
    (tmp_path / "short.idx").write_bytes(_idx([2, 2, 2], body[:5], 0x803))
    with pytest.raises(
        BadInputError,
        match=r"short.idx: header says 2 x 2 x 2 = 8 values \(24 bytes with the 16-byte "
        r"header\), the file has 21 bytes \(5 values\)",
    ):
        read_idx(str(tmp_path / "short.idx"))
    with pytest.raises(BadInputError, match="no such IDX file"):
        read_idx(str(tmp_path / "none.idx"))


def test_the_shipped_mnist_subset():
    train, test = load_mnist(mnist_sample())
    assert train.x.shape == (5000, 784) and test.x.shape == (1000, 784)
    assert train.y[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]  # MNIST's first training labels
    assert test.y[:5].tolist() == [7, 2, 1, 0, 4]
    assert 0.0 <= train.x.min() and train.x.max() == 1.0
    x, xt = centre(train.x, test.x)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(xt, test.x - train.x.mean(axis=0, dtype=np.float64), atol=1e-6)


def test_make_bags_every_image_once_and_counts_from_labels():
    labels = np.random.default_rng(3).integers(0, 10, size=103)
    bags = make_bags(labels, 4, seed=1)
    assert bags.members.shape == (25, 4)  # 103 // 4 bags, 3 images left out
    assert len(np.unique(bags.members)) == 100
    for members, counts in zip(bags.members, bags.counts, strict=True):  # twin: a plain count
        want = [0] * 10
        for i in members:
            want[labels[i]] += 1
        assert counts.tolist() == want
    with pytest.raises(ValueError, match="cannot fill one bag"):
        make_bags(labels[:3], 4, 0)


def test_mask_hand_worked_and_tau_zero_is_deep_miml():
    """Instances x1 = (1, 0), x2 = (0, 2) (normalised: the unit vectors), embeddings e0 = (1, 0),
    e1 = (0, 1), tau = ln 3: label 0's column softmax is (3, 1) / 4, so M = 2 * (0.75, 0.25) =
    (1.5, 0.5); label 1's is (0.5, 1.5)."""
    from eagle_spark.miml.network import DeepMIML

    emb = np.eye(2, dtype=np.float32)
    net = DeepMIML(2, 2, hidden=3, concepts=2, label_emb=emb, tau=math.log(3))
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])
    np.testing.assert_allclose(net.mask(x)[0].numpy(), [[1.5, 0.5], [0.5, 1.5]], rtol=1e-6)
    # the forward pass == a numpy twin: V1 = relu(relu(x W1 + b1) W2 + b2), max over concepts,
    # times M, max over instances
    p = {k: v.detach().numpy().astype(np.float64) for k, v in net.state_dict().items()}
    h = np.maximum(x.numpy()[0] @ p["base.0.weight"].T + p["base.0.bias"], 0)
    v1 = np.maximum(h @ p["base.2.weight"].T + p["base.2.bias"], 0).reshape(2, 2, 2)  # (g, K, L)
    v2 = v1.max(axis=1)
    np.testing.assert_allclose(
        net(x)[0].detach().numpy(), (v2 * [[1.5, 0.5], [0.5, 1.5]]).max(axis=0), rtol=1e-5
    )
    plain = DeepMIML(2, 2, hidden=3, concepts=2, label_emb=emb, tau=0.0)
    plain.load_state_dict(net.state_dict())
    assert plain.mask(x) is None
    np.testing.assert_allclose(plain(x)[0].detach().numpy(), v2.max(axis=0), rtol=1e-5)
    single = x[:, :1, :]  # a bag of one: M = 1, the mask steers training only
    np.testing.assert_allclose(
        net(single).detach().numpy(), plain(single).detach().numpy(), rtol=1e-6
    )
    with pytest.raises(ValueError, match=r"label_emb must be \(2, 2\)"):
        DeepMIML(2, 2, label_emb=np.eye(3, dtype=np.float32), tau=1.0)


def test_normalised_mask_hand_worked_and_centred_embeddings():
    """The mask of the hand-worked case above, M = [[1.5, 0.5], [0.5, 1.5]] (instances x labels),
    divided by each label's maximum over the instances: [[1, 1/3], [1/3, 1]]; mixed half with 1:
    [[1, 2/3], [2/3, 1]]. Centring e0 = (1, 0), e1 = (0, 1): minus the mean (1/2, 1/2), normalised."""
    from eagle_spark.miml.bags import centre_embeddings
    from eagle_spark.miml.network import DeepMIML
    from eagle_spark.miml.training import NetConfig

    emb = np.eye(2, dtype=np.float32)
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])
    half = DeepMIML(2, 2, hidden=3, concepts=2, label_emb=emb, tau=math.log(3), mask_mix=0.5)
    np.testing.assert_allclose(half.mask(x)[0].numpy(), [[1, 2 / 3], [2 / 3, 1]], rtol=1e-6)
    full = DeepMIML(2, 2, hidden=3, concepts=2, label_emb=emb, tau=math.log(3), mask_mix=1.0)
    np.testing.assert_allclose(full.mask(x)[0].numpy(), [[1, 1 / 3], [1 / 3, 1]], rtol=1e-6)
    assert half.mask(x[:, :1, :]).numpy().tolist() == [[[1.0, 1.0]]]  # a bag of one: M' = 1
    with pytest.raises(ValueError, match="mask_mix must be in"):
        DeepMIML(2, 2, label_emb=emb, tau=1.0, mask_mix=0.0)
    with pytest.raises(ValueError, match="mask_mix must be in"):
        NetConfig(mask_mix=1.5)
    r = 1 / math.sqrt(2)
    np.testing.assert_allclose(centre_embeddings(emb), [[r, -r], [-r, r]], rtol=1e-6)
    assert not centre_embeddings(np.ones((3, 2), dtype=np.float32)).any()  # all alike: nothing left
    with pytest.raises(ValueError, match="n_labels >= 2"):
        centre_embeddings(emb[:1])


def test_proportion_loss_hand_worked():
    from eagle_spark.miml.network import proportion_loss

    # equal logits over 2 labels: log_softmax = ln 1/2 for both, whatever the target: loss = ln 2
    loss = proportion_loss(torch.zeros(1, 2), torch.tensor([[1.0, 3.0]]))
    assert float(loss) == pytest.approx(math.log(2))
    # logits (ln 3, 0): softmax (3/4, 1/4); target (1/4, 3/4): -(1/4 ln 3/4 + 3/4 ln 1/4)
    loss = proportion_loss(torch.tensor([[math.log(3), 0.0]]), torch.tensor([[1.0, 3.0]]))
    assert float(loss) == pytest.approx(-(0.25 * math.log(0.75) + 0.75 * math.log(0.25)))


def test_bags_by_aggregate_and_multiset_embeddings_equal_a_count_weighted_twin(spark, tmp_path):
    """The aggregate job's bags hold every image once with the counts of their digits; GRLR's e0
    (T = 0) on the multiset dataset equals Proj(sum over bags of count_k x the bag's normalised
    images), computed here directly; with g large every set-based e0 would be one vector."""
    from eagle_spark.miml.bags import (
        multiset_dataset,
        spark_bags,
        write_images_dataset,
    )
    from eagle_spark.ml.miml import label_embeddings

    train, _ = load_mnist(mnist_sample())
    x, y = centre(train.x[:120])[0], train.y[:120]
    images = write_images_dataset(x, y, str(tmp_path / "images"))
    bags = spark_bags(spark, images, str(tmp_path / "bags"), 12, seed=0)
    assert bags.members.shape == (10, 12) and sorted(bags.members.ravel().tolist()) == list(
        range(120)
    )
    for members, counts in zip(bags.members, bags.counts, strict=True):
        assert counts.tolist() == np.bincount(y[members], minlength=10).tolist()
    multiset = multiset_dataset(images, bags, str(tmp_path / "multiset"))
    y2 = pq.read_table(f"{multiset}/Y2")
    assert y2.num_rows == 120 and set(y2.column("count").to_pylist()) == {
        1
    }  # one group per image's digit
    emb = label_embeddings(spark, multiset, str(tmp_path / "emb"), 0, 0.1)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    for k in range(10):
        s = sum(
            int(bags.counts[j, k]) * xn[bags.members[j]].sum(axis=0).astype(np.float64)
            for j in range(10)
        )
        want = s / np.linalg.norm(s)
        np.testing.assert_allclose(emb[k], want, atol=2e-6)
    assert json.loads((tmp_path / "multiset" / "_manifest.json").read_text())["n_groups"] == 120


def test_embed_tasks_keep_dense_label_blocks_apart():
    """1,200 bags of 50 with 5 images of each digit: a digit's candidate rows are 1,200 x 5 x 50 =
    300,000 rows of 784 pixels, 20 GB of label block at 85 bytes per nonzero: one task. 15,000
    bags of 4 with one image of each of 4 digits: 60,000 rows, 4.0 GB (< 4 GiB): the default 16."""
    from eagle_spark.miml.bags import embed_tasks

    counts = np.full((1200, 10), 5)
    assert embed_tasks(Bags(np.zeros((1200, 50), np.int64), counts), 784) == 1
    counts = np.zeros((15000, 10), np.int64)
    counts[:, :4] = 1
    assert embed_tasks(Bags(np.zeros((15000, 4), np.int64), counts), 784) == 16
    assert embed_tasks(Bags(np.zeros((15000, 4), np.int64), counts), 784, budget_bytes=2 << 30) == 1


def test_training_lowers_the_loss_and_learns_digits():
    from eagle_spark.miml.training import NetConfig, train_bags

    train, test = load_mnist(mnist_sample())
    x, xt = centre(train.x, test.x)
    bags = make_bags(train.y, 4, seed=0)
    _, hist = train_bags(x, bags, NetConfig(epochs=3, lr=1e-3), None, (xt, test.y))
    assert hist[-1]["loss"] < hist[0]["loss"]
    assert hist[-1]["val_accuracy"] > 80.0  # 10 digits: chance is 10 %


@pytest.mark.slow
def test_torch_distributor_two_processes_equal_one_process_with_the_doubled_batch(spark):
    """Data-parallel training on 2 TorchDistributor processes (DDP over gloo, batch B each) takes
    the same steps as one process with batch 2B over the same bag order: process r's b-th batch
    is positions r, r + 2, ... of the order, so both ranks' batches b together are the one
    process's batch b, and DDP averages the two gradients of mean losses."""
    from eagle_spark.miml.training import NetConfig, train_bags, train_distributed

    train, _ = load_mnist(mnist_sample())
    x = centre(train.x[:1024])[0]
    bags = make_bags(train.y[:1024], 4, seed=0)  # 256 bags: 8 steps of 32
    emb = np.eye(10, 784, dtype=np.float32)
    one, hist1 = train_bags(x, bags, NetConfig(epochs=2, batch_size=32, hidden=32, concepts=2), emb)
    two, hist2 = train_distributed(
        x,
        bags,
        NetConfig(epochs=2, batch_size=16, hidden=32, concepts=2),
        emb,
        None,
        num_processes=2,
    )
    assert sorted(one) == sorted(two)
    for name in one:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-4, atol=1e-6)
    assert len(hist2) == 2 and math.isnan(hist2[0]["val_accuracy"])
    for a, b in zip(hist1, hist2, strict=True):  # the losses all-reduced: the one process's
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)


@pytest.mark.slow
def test_cli_writes_results_and_figures(spark, tmp_path, capsys):
    from eagle_spark.cli import main

    out = tmp_path / "miml"
    assert (
        main(
            [
                "miml",
                "--output",
                str(out),
                "--group-size",
                "4",
                "--seeds",
                "2",
                "--epochs",
                "2",
                "--train-images",
                "800",
                "--test-images",
                "200",
            ]
        )
        == 0
    )
    result = json.loads((out / "results.json").read_text())
    assert set(result["methods"]) == {"deep-miml", "eagle0", "eagle"}
    assert result["n_bags"] == 200 and result["methods"]["eagle"]["paper"] == 94.82
    assert all(len(r["accuracy"]) == 2 for r in result["methods"].values())
    assert (out / "curves.png").stat().st_size > 10_000 and (
        out / "embeddings.png"
    ).stat().st_size > 10_000
    assert not [p for p in out.iterdir() if p.name.startswith("_work")]  # the work folder is gone
    assert main(["miml", "--output", str(tmp_path / "x"), "--images", str(tmp_path / "none")]) == 2
    assert "no train-images.idx3-ubyte (or train-images.idx3-ubyte.gz)" in capsys.readouterr().err
