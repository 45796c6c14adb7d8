"""The units of claim C5 and the data over them that heuristics, outliers and neuron patching share.

A *unit* is one MLP neuron (layer l, index i) at one answer position j: neurons are read at the
sequence positions that predict the answer digits (positions 9..13 for ``a+b=`` prompts: the
``=`` and the first four answer tokens), teacher-forced on the answer, as the model runs when it
generates. The same neuron at two positions computes different things, so it is classified per
position. Arrays over units have shape [L, A, d_mlp] (L analysed layers, A = 5 answer positions).

- :class:`HeuristicMap` -- the classification of every unit (made by :mod:`rote.analysis.heuristics`);
- :class:`NeighbourStats` -- the activations of examples and of their clean neighbours per unit, and
  their z-scores (made by :mod:`rote.analysis.outliers`; :mod:`rote.analysis.neuron_patching` patches
  units to their clean-neighbour expectations).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch


# -- heuristic units ------------------------------------------------------------------------------
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

    # -- neurons as units (protocol section 5: "at least 20% of neurons") ---------------------
    @property
    def home_position(self) -> torch.Tensor:
        """[L, D] each neuron's *home* answer position: the one where its top-k grid activations are
        largest on average (where it fires for its pattern)."""
        if self.top_mean is None:
            raise ValueError("this HeuristicMap was built without top_mean")
        return self.top_mean.argmax(1)

    @property
    def neuron_heuristic(self) -> torch.Tensor:
        """Bool [L, D]: a neuron is a heuristic when it is a heuristic unit at its home position.

        One classification per neuron, at the position where it fires most strongly for its top
        inputs, so that a neuron is tested once, as in section 5 ("for every MLP neuron, take its
        top-activating inputs"); counting a neuron that is a heuristic at *any* of the five
        positions would give every neuron five chances to pass."""
        home = self.home_position
        return self.heuristic.gather(1, home[:, None]).squeeze(1)

    @property
    def neuron_fraction(self) -> float:
        """The share of neurons (over the analysed layers) that are heuristics."""
        return float(self.neuron_heuristic.double().mean())

    def neuron_layer_fractions(self) -> list[float]:
        return [float(x) for x in self.neuron_heuristic.double().mean(dim=1)]

    @property
    def any_position_fraction(self) -> float:
        """The share of neurons that are a heuristic unit at one answer position at least (shown
        beside :attr:`neuron_fraction`, never judged)."""
        return float(self.heuristic.any(1).double().mean())


# -- clean neighbours -----------------------------------------------------------------------------
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
        """The clean-neighbour expectation used for patching: feature-matched mean, else all neighbours."""
        return torch.where(self.mean.isnan(), self.mean_all, self.mean)
