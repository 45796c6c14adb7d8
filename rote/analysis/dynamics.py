"""Claim C1 from learning curves: generalize first, then memorize; the memorization is benign."""

from __future__ import annotations

import pandas as pd

from ..claims import THRESHOLDS
from ..train import first_step


def c1_evaluation(noisy: pd.DataFrame, clean: pd.DataFrame) -> tuple[dict, dict]:
    """Metrics and checks of C1 from the metric tables of a noisy run and its noise-free twin."""
    th = THRESHOLDS["C1"]
    t_gen = first_step(noisy, "gen", th["t_gen_level"])
    t_mem = first_step(noisy, "mem", th["t_mem_level"])
    final, final_clean = noisy.iloc[-1], clean.iloc[-1]
    # rec "around t_gen": the evaluation closest to t_gen; shows noisy examples answered by the rule
    rec_at_t_gen = float(noisy.loc[(noisy["step"] - (t_gen or 0)).abs().idxmin(), "rec"]) if t_gen is not None \
        else float("nan")
    metrics = {
        "t_gen": t_gen, "t_mem": t_mem,
        "final_gen": float(final["gen"]), "final_mem": float(final["mem"]), "final_rec": float(final["rec"]),
        "final_fit": float(final["fit"]), "clean_final_gen": float(final_clean["gen"]),
        "gen_cost": float(final_clean["gen"] - final["gen"]), "rec_at_t_gen": rec_at_t_gen,
        "steps": int(final["step"]),
    }
    checks = {
        "t_gen < t_mem": t_gen is not None and t_mem is not None and t_gen < t_mem,
        f"final mem >= {th['final_mem_min']}": metrics["final_mem"] >= th["final_mem_min"],
        f"final gen >= {th['final_gen_min']}": metrics["final_gen"] >= th["final_gen_min"],
        f"gen >= noise-free gen - {th['benign_gen_drop_max']}":
            metrics["final_gen"] >= metrics["clean_final_gen"] - th["benign_gen_drop_max"],
    }
    return metrics, checks
