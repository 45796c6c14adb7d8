from ..spec import ClaimSpec, Threshold

SPEC = ClaimSpec(
    "C2", "Intermediate results are still computed on memorized examples", ("fda", "thr"),
    "03_intermediate_results", runs=("noisy",), parts=("probes", "lens"),
    thresholds={
        "probe_ratio_min": 0.8,  # probe accuracy on M >= 0.8 x accuracy on C
        "probe_over_chance_min": 5.0,  # ... and >= 5 x chance
        # the lens share's 95% binomial (Wilson) interval must lie above the training-label prior's share
        "lens_interval_level": Threshold(0.95, "7.4"),
    },
    amendments=("7", "8"))
