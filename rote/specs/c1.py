from ..spec import ClaimSpec

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
    },
    amendments=("7", "8"))
