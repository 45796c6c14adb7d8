from ..spec import ClaimSpec, Threshold

SPEC = ClaimSpec(
    "C4", "Distributed encoding, not a look-up", ("fda", "thr"), "05_distributed_encoding", runs=("noisy",),
    # 8.1: the look-up statistics decide only where their control validates them: not a required part
    parts=("intermediate",),
    thresholds={
        "k50_ratio_min": 0.5,  # median k50 on M >= 0.5 x median k50 on C
        "activity_fraction_min": 0.05,
        "activity_quantile": 0.9,
        "top_neurons": 10,
        "drop_min": 0.2,  # an input position / the intermediate result removes >= 20% of P(noisy label)
        "positions_min": 2,
        # INLP's drop of P(noisy label) minus the information-matched control's drop
        "intermediate_over_matched_min": Threshold(0.2, "7.6"),
    },
    amendments=("7", "8"))
