"""The units of claim C5: one MLP neuron (layer l, index i) at one answer position j (sequence positions
9..13 of ``a+b=``: the ``=`` and the first four answer tokens, teacher-forced on the answer), since the
same neuron computes different things at two positions. Arrays over units are [L, A, d_mlp]: the
classification (:class:`HeuristicMap`) and the activations against clean neighbours (:class:`NeighbourStats`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch


@dataclass
class HeuristicMap:
    """The classification of every unit (layer, answer position, neuron); arrays are [L, A, d_mlp]."""

    layers: list[int]
    feature_names: list[str]  # the candidate features (base rate within bounds)
    feature_kinds: list[str]
    feature_columns: torch.Tensor  # [F'] their columns in feature_table
    best: torch.Tensor  # long: index into feature_names
    coverage: torch.Tensor
    base_rate: torch.Tensor
    score: torch.Tensor
    heuristic: torch.Tensor  # bool
    grid_sd: torch.Tensor  # the unit's activation sd over the grid
    top_k: int
    coverage_min: float
    top_mean: torch.Tensor | None = None  # the mean of the unit's top-k grid activations
    score_cut: torch.Tensor | None = None  # [L, A] amendment 2 (8.3): heuristic = score > cut (None: coverage rule)

    def table(self) -> pd.DataFrame:
        """One row per unit: layer, position, neuron, feature, kind, coverage, base_rate, score, heuristic."""
        L, A, D = self.best.shape
        l, j, i = torch.meshgrid(torch.arange(L), torch.arange(A), torch.arange(D), indexing="ij")
        best = self.best.flatten().numpy()
        return pd.DataFrame({
            "layer": np.asarray(self.layers)[l.flatten().numpy()], "position": j.flatten().numpy(),
            "neuron": i.flatten().numpy(), "feature": np.asarray(self.feature_names, dtype=object)[best],
            "kind": np.asarray(self.feature_kinds, dtype=object)[best], "coverage": self.coverage.flatten().numpy(),
            "base_rate": self.base_rate.flatten().numpy(), "score": self.score.flatten().numpy(),
            "heuristic": self.heuristic.flatten().numpy()})

    def per_layer(self) -> pd.DataFrame:
        """Share of units per layer that are heuristics, by the kind of their best feature."""
        t = self.table()
        counts = t[t.heuristic].groupby(["layer", "kind"]).size().rename("units").reset_index()
        totals = t.groupby("layer").size()
        counts["fraction"] = counts["units"] / counts["layer"].map(totals)
        return counts

    @property
    def heuristic_fraction(self) -> float:
        return float(self.heuristic.double().mean())

    def layer_fractions(self) -> list[float]:
        return [float(x) for x in self.heuristic.double().mean(dim=(1, 2))]

    def empty_layers(self) -> list[int]:
        """The analysed layers that hold no heuristic unit at any answer position."""
        return [int(l) for li, l in enumerate(self.layers) if not bool(self.heuristic[li].any())]

    @property
    def home_position(self) -> torch.Tensor:
        """[L, D] each neuron's home answer position: where its top-k grid activations are largest on average."""
        if self.top_mean is None:
            raise ValueError("this HeuristicMap was built without top_mean")
        return self.top_mean.argmax(1)

    @property
    def neuron_heuristic(self) -> torch.Tensor:
        """Bool [L, D]: a heuristic unit at its home position (section 5 counts neurons: one test each, not
        five chances to pass)."""
        return self.heuristic.gather(1, self.home_position[:, None]).squeeze(1)

    @property
    def neuron_fraction(self) -> float:
        """The share of neurons (over the analysed layers) that are heuristics."""
        return float(self.neuron_heuristic.double().mean())

    def neuron_layer_fractions(self) -> list[float]:
        return [float(x) for x in self.neuron_heuristic.double().mean(dim=1)]

    @property
    def any_position_fraction(self) -> float:
        """The share of neurons that are a heuristic unit at some answer position (shown, never judged)."""
        return float(self.heuristic.any(1).double().mean())


@dataclass
class NeighbourStats:
    """Activations of examples and of their clean neighbours, per unit; arrays [N, L, A, D]."""

    act: torch.Tensor  # on x, teacher-forced on its own label
    mean: torch.Tensor  # neighbours that share the unit's feature value (NaN if fewer than min_count)
    sd: torch.Tensor
    count: torch.Tensor
    mean_all: torch.Tensor  # all clean neighbours
    z: torch.Tensor
    differs: torch.Tensor  # bool [N, A]: label digit != true digit at that answer position
    layers: list[int] = field(default_factory=list)

    @property
    def expected(self) -> torch.Tensor:
        """The expectation patched in: the feature-matched mean, else the mean over all neighbours."""
        return torch.where(self.mean.isnan(), self.mean_all, self.mean)
