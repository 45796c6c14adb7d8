from ..spec import ClaimSpec, Threshold

SPEC = ClaimSpec(
    "C5", "FDA outlier heuristics", ("fda",), "06_outlier_heuristics", runs=("noisy",),
    parts=("heuristic share", "outlier |z|", "specificity"),
    thresholds={
        "heuristic_coverage_min": 0.8,
        "heuristic_fraction_min": 0.2,
        "z_ratio_min": 2.0,
        "pattern_corr_min": 0.5,
        "patch_revert_min": 0.5,
        "control_revert_max": 0.1,
        # m50 is the smallest m of this grid whose top-m patch reverts >= patch_revert_min
        "m_grid": Threshold((1, 2, 5, 10, 25, 50, 100, 200), "7.7"),
        # the heuristic share must also be >= 2 x the untrained model's share
        "untrained_share_factor_min": Threshold(2.0, "7.7"),
        # a heuristic unit's best-feature score exceeds this quantile of the scores of the units at its
        # layer and answer position in an untrained model (model seed s + 1000)
        "untrained_cut_quantile": Threshold(0.99, "8.3"),
        "untrained_cut_seed_offset": Threshold(1000, "8.3"),
    },
    amendments=("7", "8"))
