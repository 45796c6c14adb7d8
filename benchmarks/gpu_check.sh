#!/usr/bin/env bash
# One prepared GPU check (issue 44, part 5), for a lent GPU machine whose python3 has torch, numpy and pandas
# but no package registry: it installs nothing. Run from the repository root:
#
#   OUT=/some/folder bash benchmarks/gpu_check.sh               # on the GPU machine (device cuda)
#   OUT=/some/folder bash benchmarks/gpu_check.sh --cpu-smoke   # the same stages, smoke profile, CPU (tests)
#
# Stages, each timed and bounded by its own `timeout` (a slow stage leaves the others their time), the whole
# bounded by GPU_CHECK_TOTAL_S (480 s on the GPU):
#   bench   benchmarks/step_bench.py: step and evaluation per shape, solo and stacked, against the matmul rate
#   quick   the quick plan, 3 seeds, stacked             (rote train --plan --stack)
#   x1      X1's grid with 12.4's rate-selection runs     (rote train --plan --x1 --stack; the quick plan cached)
#   paper   the paper plan's seed 0, FDA and THR, stacked (bounded: it is not expected to finish in its time;
#           the steps each run reached are in records/progress/)
# Under $OUT: gpu_check.md (the machine and the table: stage, seconds, limit, exit code, runs reported),
# logs/<stage>.out|.err, bench.json, and records/<run>/ (config.json, manifest.json, metrics.csv of every run
# trained; the checkpoints stay in $ROTE_RUNS, by default a temporary folder). Exit code 0 when every stage
# exited 0, else 1 (the table says which did not).
set -u

MODE=gpu
if [[ "${1:-}" == "--cpu-smoke" || "${GPU_CHECK_CPU_SMOKE:-0}" == 1 ]]; then MODE=cpu-smoke; fi
: "${OUT:?set OUT to the folder for the table and the records}"
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD ROTE_PLAIN_PROGRESS=1 ROTE_NO_PROBE=1  # no timing probes: the stages time themselves
export ROTE_RUNS=${GPU_CHECK_RUNS:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-runs.XXXXXX")}
mkdir -p "$OUT/logs" "$OUT/records" "$ROTE_RUNS"

if [[ $MODE == gpu ]]; then
  DEVICE=cuda; PROFILE=quick; PAPER=paper; SEEDS=3; TOTAL=${GPU_CHECK_TOTAL_S:-480}
  BENCH_ARGS=(--shapes quick-fda,quick-thr,paper-fda --stacks 1,3,15,45 --steps 30 --warmup 5)
  BUDGET_BENCH=60; BUDGET_QUICK=100; BUDGET_X1=150; BUDGET_PAPER=150
else
  DEVICE=cpu; PROFILE=smoke; PAPER=smoke; SEEDS=1; TOTAL=${GPU_CHECK_TOTAL_S:-240}
  BENCH_ARGS=(--shapes smoke-fda --stacks 1,3 --steps 3 --warmup 1 --rate-seconds 0.1)
  BUDGET_BENCH=60; BUDGET_QUICK=60; BUDGET_X1=90; BUDGET_PAPER=30
fi
TRAIN=(-m rote train --plan --stack --device "$DEVICE" --quiet)
START=$(date +%s)
TABLE=$OUT/gpu_check.md

{
  echo "# GPU check ($MODE), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "- python: $("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1)"
  echo "- torch: $("$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1)"
  echo "- device: $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device")' 2>&1)"
  echo "- cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
  echo "- runs root: $ROTE_RUNS"
  echo
  echo "| stage | seconds | limit s | exit code | runs reported |"
  echo "|---|---|---|---|---|"
} > "$TABLE"

FAILED=0
stage() {  # stage NAME BUDGET_S COMMAND...: run COMMAND under min(BUDGET, time left) seconds; one table row
  local name=$1 budget=$2 left limit t0 rc seconds runs
  shift 2
  left=$((TOTAL - ($(date +%s) - START)))
  limit=$((budget < left ? budget : left))
  if ((limit < 5)); then
    echo "| $name | - | $limit | skipped: no time left | 0 |" >> "$TABLE"
    FAILED=1
    return
  fi
  t0=$(date +%s.%N)
  timeout -k 20 "$limit" "$@" > "$OUT/logs/$name.out" 2> "$OUT/logs/$name.err"
  rc=$?
  seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  runs=$(grep -c '"key"' "$OUT/logs/$name.out")
  if ((rc == 124 || rc == 137)); then rc="$rc (timed out)"; fi
  echo "| $name | $seconds | $limit | $rc | $runs |" >> "$TABLE"
  [[ $rc == 0 ]] || FAILED=1
}

stage bench "$BUDGET_BENCH" "$PY" benchmarks/step_bench.py --device "$DEVICE" --json "$OUT/bench.json" "${BENCH_ARGS[@]}"
stage quick "$BUDGET_QUICK" "$PY" "${TRAIN[@]}" --profile "$PROFILE" --seeds "$SEEDS"
stage x1 "$BUDGET_X1" "$PY" "${TRAIN[@]}" --profile "$PROFILE" --seeds "$SEEDS" --x1
stage paper "$BUDGET_PAPER" "$PY" "${TRAIN[@]}" --profile "$PAPER" --seeds 1

# the records: every stored run's configuration, manifest and metrics; the progress of the unfinished ones
for run in "$ROTE_RUNS"/*-*/; do
  [[ -f $run/manifest.json ]] || continue
  mkdir -p "$OUT/records/$(basename "$run")"
  cp "$run"/config.json "$run"/manifest.json "$run"/metrics.csv "$OUT/records/$(basename "$run")/"
done
if compgen -G "$ROTE_RUNS/.progress/*.json" > /dev/null; then
  mkdir -p "$OUT/records/progress" && cp "$ROTE_RUNS"/.progress/*.json "$OUT/records/progress/"
fi
{
  echo
  echo "$(find "$OUT/records" -name manifest.json | wc -l) runs stored (records/); total $(($(date +%s) - START)) s."
  if [[ -f $OUT/logs/bench.out ]]; then echo; cat "$OUT/logs/bench.out"; fi
} >> "$TABLE"
cat "$TABLE"
exit $FAILED
