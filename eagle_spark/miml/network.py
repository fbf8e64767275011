"""Deep-MIML (Feng & Zhou 2017) and EAGLE's co-attention variant (paper section 5, Figure 2), in
PyTorch.

For a bag X of g instances (g x d):

* base model, two fully connected layers with ReLU: d -> ``hidden`` -> K x L, reshaped to the
  g x K x L tensor V1 (K concepts per label, L labels);
* V2 = max over the K concepts (g x L, the multi-instance logits);
* EAGLE: M = g * softmax_i(tau * x_i . e_j), the softmax taken over the g instances of each
  label's column, x_i the L2-normalised instance and e_j label j's GRLR embedding; V2 <- M * V2
  (tau = 0 gives M = 1: plain Deep-MIML). By default the mask is M' = 1/2 + 1/2 M / max_i M
  (``mask_mix``; :class:`DeepMIML` says why the printed M fails at g = 50);
* the bag's logits: max over the g instances of V2 (length L).

A single test image is a bag of one, where M = 1: the mask steers training only.

Training loss: cross-entropy between softmax(logits) and the bag's label proportions (counts / g),
so a bag's repeated labels count as often as they occur (with g = 50 nearly every bag holds every
digit: a label set would carry no signal, paper appendix).

Needs PyTorch (the ``miml`` extra: ``pip install eagle-spark[miml]``).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "eagle_spark.miml needs PyTorch: pip install 'eagle-spark[miml]' "
        "(the CPU build: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
    ) from exc


class DeepMIML(nn.Module):
    """The Deep-MIML network with an optional co-attention mask from label embeddings.

    Args:
        n_features: d, pixels per instance (784 for MNIST).
        n_labels: L.
        hidden: width of the first layer.
        concepts: K, the concept size.
        label_emb: (L, d) label embeddings (rows L2-normalised by GRLR); None: no mask.
        tau: hardness of the soft assignment (0: no mask, as Deep-MIML).
        mask_mix: None: the paper's mask M = g softmax (section 5, as printed). alpha in (0, 1]:
            M' = (1 - alpha) + alpha M / max_i M, the mask divided by its maximum over the bag's
            instances and mixed with 1. An accurate paper's mask is ~g / (the label's instances)
            on them and ~0 elsewhere, so training shrinks the right instances' logits by that
            factor and a test image (a bag of one, M = 1) loses its label (measured: 0.45% accuracy
            at g = 50 with centred embeddings, tau 10); M' does not rescale, and the mix keeps a
            gradient on every instance (docs/experiments.md, Table 3).
    Raises:
        ValueError: label_emb not (n_labels, n_features), a size < 1, or mask_mix outside (0, 1].
    """

    label_emb: "torch.Tensor"  # a buffer (register_buffer), typed for the checker

    def __init__(
        self,
        n_features: int,
        n_labels: int,
        hidden: int = 256,
        concepts: int = 4,
        label_emb: Optional[np.ndarray] = None,
        tau: float = 0.0,
        mask_mix: Optional[float] = None,
    ) -> None:
        super().__init__()
        if min(n_features, n_labels, hidden, concepts) < 1:
            raise ValueError("n_features, n_labels, hidden and concepts must be >= 1")
        if mask_mix is not None and not 0 < mask_mix <= 1:
            raise ValueError(f"mask_mix must be in (0, 1] or None, got {mask_mix}")
        self.mask_mix = mask_mix
        if label_emb is not None and tuple(label_emb.shape) != (n_labels, n_features):
            raise ValueError(
                f"label_emb must be ({n_labels}, {n_features}), got {tuple(label_emb.shape)}"
            )
        self.n_labels, self.concepts, self.tau = n_labels, concepts, float(tau)
        self.base = nn.Sequential(
            nn.Linear(n_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, concepts * n_labels),
            nn.ReLU(),
        )
        emb = (
            torch.zeros(0)
            if label_emb is None
            else torch.as_tensor(np.asarray(label_emb, np.float32))
        )
        self.register_buffer("label_emb", emb)

    def instance_logits(self, x: "torch.Tensor") -> "torch.Tensor":
        """V2, (B, g, L): the max over concepts of the base model's (B, g, K, L) output."""
        b, g, _ = x.shape
        v1 = self.base(x).view(b, g, self.concepts, self.n_labels)
        return v1.max(dim=2).values

    def mask(self, x: "torch.Tensor") -> Optional["torch.Tensor"]:
        """M, (B, g, L) = g * softmax over the g instances of tau * x_i . e_j, or M' with
        `mask_mix` (class docstring); None without a mask."""
        if self.label_emb.numel() == 0 or self.tau == 0.0:
            return None
        xn = nn.functional.normalize(x, dim=2)
        m = x.shape[1] * torch.softmax(self.tau * xn @ self.label_emb.T, dim=1)
        if self.mask_mix is None:
            return m
        return (1 - self.mask_mix) + self.mask_mix * m / m.max(dim=1, keepdim=True).values

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """Bag logits (B, L) of bags x (B, g, d)."""
        v2 = self.instance_logits(x)
        m = self.mask(x)
        if m is not None:
            v2 = v2 * m
        return v2.max(dim=1).values


def proportion_loss(logits: "torch.Tensor", counts: "torch.Tensor") -> "torch.Tensor":
    """Mean over bags of the cross-entropy between softmax(logits) and counts / counts.sum()."""
    target = counts / counts.sum(dim=1, keepdim=True)
    return -(target * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()


def accuracy(net: nn.Module, x: np.ndarray, y: np.ndarray, batch: int = 4096) -> float:
    """Top-1 accuracy, %, of single instances x (n, d) (bags of one) against labels y (n,)."""
    net.eval()
    hits = 0
    with torch.no_grad():
        for lo in range(0, len(x), batch):
            xb = torch.as_tensor(x[lo : lo + batch]).unsqueeze(1)
            hits += int((net(xb).argmax(dim=1).numpy() == y[lo : lo + batch]).sum())
    net.train()
    return 100.0 * hits / max(len(x), 1)


def state_numpy(net: nn.Module) -> dict[str, Any]:
    """The network's parameters as numpy arrays (picklable across processes)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}
