"""benchmarks/gpu_check.sh: valid bash, and its CPU part (the same stages on the smoke profile) writes the
table and the records under $OUT."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.sh"
STAGES = ("bench", "quick", "x1", "paper")


def test_the_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def cpu_smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu_check")
    env = {**os.environ, "OUT": str(tmp / "out"), "GPU_CHECK_RUNS": str(tmp / "runs"), "PYTHON": sys.executable}
    result = subprocess.run(["bash", str(SCRIPT), "--cpu-smoke"], cwd=SCRIPT.parents[1], env=env,
                            capture_output=True, text=True, timeout=300)
    return result, tmp / "out"


def _rows(table: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split("|") for line in table.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


def test_every_stage_ran_and_is_in_the_table(cpu_smoke):
    result, out = cpu_smoke
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = _rows((out / "gpu_check.md").read_text())
    for stage in STAGES:
        seconds, limit, code, runs = rows[stage]
        assert code == "0" and float(seconds) <= float(limit), (stage, rows[stage])
    assert int(rows["quick"][3]) == 5 and int(rows["x1"][3]) > 5  # the smoke plan; X1's grid beside it
    assert "smoke-fda | fp32 | stacked | 3" in (out / "gpu_check.md").read_text()
    assert {line["mode"] for line in json.loads((out / "bench.json").read_text())["lines"]} == {"solo", "stacked"}


def test_the_records_of_every_run_are_under_out_and_say_they_trained_stacked(cpu_smoke):
    _, out = cpu_smoke
    records = [p for p in (out / "records").iterdir() if p.name != "progress"]
    assert len(records) > 5
    manifests = [json.loads((p / "manifest.json").read_text()) for p in records]
    assert all((p / "metrics.csv").exists() and (p / "config.json").exists() for p in records)
    assert max(m["stacked"] for m in manifests) > 1 and {m["device"] for m in manifests} == {"cpu"}
