from ..spec import BEYOND_GROUP, ClaimSpec, Threshold

SPEC = ClaimSpec(
    "X1", "When is memorization benign? The gen cost against model width", ("fda",), "07_benign_memorization",
    runs=("x1",),  # X1's grid; without X1 asked for, only C1's FDA random units (x1.load)
    parts=("memorization", "cost at the largest width", "not rising"),
    thresholds={
        "cost_largest_max": 0.05,  # gen cost (twin gen - noisy gen, mean of last 5) at the largest width <= 0.05
        "rise_max": 0.02,  # each step up in width lowers the cost or leaves it within 0.02
        "final_mem_min": 0.9,  # a width whose final mem is below 0.9 is unresolved
        "twin_gen_min": Threshold(0.9, "12.2"),  # validity per width: the noise-free twin trained (final gen >= 0.9)
        "plateau_rise_max": Threshold(0.05, "12.3"),  # validity per width: the noisy run's mem has plateaued
    },
    amendments=("12",),
    conditions=("random",),  # protocol 9: FDA random noise only
    registered_in="9", group=BEYOND_GROUP,
    fails_only_on="x1.cost_largest",  # fails only when the cost at the largest width is too high on every seed
    stability=False)  # protocol 10 reruns the paper's claims
