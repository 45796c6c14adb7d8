from ..spec import ClaimSpec, Threshold

SPEC = ClaimSpec(
    "C1", "Generalize first, then memorize; the memorization is benign", ("fda", "thr"), "02_learning_dynamics",
    runs=("noisy", "twin", "sweep"),  # each unit's noisy run and twin (c1.load); the noise-ratio sweep
    parts=("ordering", "final mem", "final gen", "benign gap"),
    thresholds={
        "t_gen_level": 0.9,  # t_gen = first evaluated step with gen >= 0.9
        "t_mem_level": 0.5,  # t_mem = first evaluated step with mem >= 0.5
        "final_mem_min": 0.9,
        "final_gen_min": 0.9,
        "benign_gen_drop_max": 0.05,  # gen(noisy run) >= gen(noise-free run) - 0.05
        "twin_gen_min": Threshold(0.9, "12.2"),  # validity: the noise-free twin trained (its final gen >= 0.9)
        "plateau_rise_max": Threshold(0.05, "12.3"),  # validity: final mem exceeds mem at 90% of the steps by <= 0.05
    },
    amendments=("7", "8", "12"))
