"""The |z| ratio functions of claim C5 (rote.analysis.outliers.outlier_comparison and null_comparison)
on planted statistics whose ratio is 2: a ratio of 1 (identical sets) cannot tell a ratio from its
inverse, from a difference, or from a constant."""

import math
from types import SimpleNamespace

import pytest
import torch

from rote.analysis import outliers as O
from rote.analysis import units as U


def _stats(z, differs):
    """Statistics of N examples, 1 layer, A answer positions, D units, with the given z [N, 1, A, D]."""
    g = torch.Generator().manual_seed(0)
    act = torch.randn(z.shape, generator=g)
    return U.NeighbourStats(act=act, mean=act + 0.1 * torch.randn(z.shape, generator=g), sd=torch.ones_like(z),
                            count=torch.full_like(z, 5.0), mean_all=act.clone(), z=z, differs=differs, layers=[0])


N, A, D = 6, 5, 4


@pytest.fixture
def planted():
    base = 0.5 + torch.rand(N, 1, A, D, generator=torch.Generator().manual_seed(1))  # |z| of the reference
    sign = torch.where(torch.rand(base.shape, generator=torch.Generator().manual_seed(2)) < 0.5, -1.0, 1.0)
    differs = torch.ones(N, A, dtype=torch.bool)
    hmap = SimpleNamespace(heuristic=torch.ones(1, A, D, dtype=torch.bool))
    return _stats(2.0 * base * sign, differs), _stats(base, differs), hmap, base


def test_outlier_comparison_of_twice_the_clean_z_is_two(planted):
    memorized, clean, hmap, base = planted
    out = O.outlier_comparison(memorized, clean, hmap)
    assert out.median_abs_z_clean == pytest.approx(float(base.flatten().median()))
    assert out.median_abs_z_M == pytest.approx(2 * out.median_abs_z_clean)
    assert out.z_ratio == pytest.approx(2.0) and out.z_ratio_all_positions == pytest.approx(2.0)
    assert O.outlier_comparison(clean, memorized, hmap).z_ratio == pytest.approx(0.5)  # the other way round


def test_null_comparison_of_twice_the_null_z_is_two(planted):
    memorized, null, hmap, base = planted
    out = O.null_comparison(memorized, null, hmap)
    assert out.median_abs_z_null == pytest.approx(float(base.flatten().median()))
    for key in ("z_null_ratio", "z_null_ratio_position9", "z_null_ratio_after_position9"):
        assert getattr(out, key) == pytest.approx(2.0), key
    assert out.median_abs_z_position9_M == pytest.approx(2 * out.median_abs_z_position9_null)
    assert out.median_abs_z_position9_null == pytest.approx(float(base[:, :, 0].flatten().median()))
    assert out.n_null == N
    assert O.null_comparison(null, memorized, hmap).z_null_ratio == pytest.approx(0.5)


def test_ratios_count_only_memorized_digits_and_heuristic_units(planted):
    """Where labels agree with the true digits, or on units that are not heuristic, z does not count."""
    memorized, null, hmap, base = planted
    z = memorized.z.clone()
    z[:, :, 1:, 0] = 100.0  # unit 0 after position 9: not a heuristic unit below
    differs = torch.ones(N, A, dtype=torch.bool)
    differs[:, 2] = False
    z[:, :, 2] = 1000.0  # position 2: no memorized digit
    hmap = SimpleNamespace(heuristic=torch.ones(1, A, D, dtype=torch.bool))
    hmap.heuristic[0, 1:, 0] = False
    m = _stats(z, differs)
    expected = float(z.abs()[hmap.heuristic[None].expand_as(z) & differs[:, None, :, None]].median()) / \
        float(base[hmap.heuristic[None].expand_as(z)].median())
    assert O.null_comparison(m, null, hmap).z_null_ratio == pytest.approx(expected)
    assert expected == pytest.approx(2.0, rel=0.2) and not math.isnan(expected)
