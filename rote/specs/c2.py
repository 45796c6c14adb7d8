from ..spec import ClaimSpec, Threshold

SPEC = ClaimSpec(
    "C2", "Intermediate results are still computed on memorized examples", ("fda", "thr"),
    "03_intermediate_results", runs=("noisy",), parts=("probes", "lens"),
    thresholds={
        "probe_ratio_min": 0.8,  # probe accuracy on M >= 0.8 x accuracy on C
        "probe_over_chance_min": 5.0,  # ... and >= 5 x chance
        # the lens share's 95% binomial (Wilson) interval must lie above the training-label prior's share
        "lens_interval_level": Threshold(0.95, "7.4"),
        # 12.1: "5 x chance" reads min(5 x chance, chance + 0.5 x (1 - chance)): half-way to a perfect probe
        "probe_halfway_share": Threshold(0.5, "12"),
    },
    amendments=("7", "8", "12"))
