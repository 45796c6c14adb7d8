from ..spec import ClaimSpec, Threshold

SPEC = ClaimSpec(
    "C3", "Intervening on the reasoning hurts memorization; the circuits overlap", ("fda", "thr"),
    "04_interventions", runs=("noisy",), parts=("erasure", "overlap"),
    thresholds={
        "erasure_mem_drop_over_control_min": 0.3,
        "overlap_min": 0.5,
        "overlap_over_random_min": 3.0,
        "top_fraction": 0.05,
        # gen sanity check: erasure lowers gen on C by more than the larger control (random,
        # information-matched) does: gen drop over that control > 0 (strictly)
        "gen_drop_over_control_above": Threshold(0.0, "7.5"),
        # where the split-half ceiling J(C, C') is below overlap_min, the overlap check becomes
        # J(M, C) >= 0.5 x J(C, C') (logit-difference attribution)
        "ceiling_ratio_min": Threshold(0.5, "7.5"),
        "bootstrap_level": Threshold(0.95, "7.5"),  # the bootstrap interval of J(M, C) shown (over examples)
    },
    amendments=("7", "8"))
