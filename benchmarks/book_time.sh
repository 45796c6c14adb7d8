#!/usr/bin/env bash
# Time `make book` (quick profile) on a fresh clone: cold (empty caches) and warm (second build).
# Usage: benchmarks/book_time.sh [clone-dir]; numbers measured on the 2-core machine are in benchmarks/RESULTS.md.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-/tmp/rote-book-bench}"
rm -rf "$dir"
git clone -q "$src" "$dir"
cd "$dir"
make install >/dev/null
t0=$(date +%s); make book > cold.log 2>&1; t1=$(date +%s)
make book > warm.log 2>&1; t2=$(date +%s)
echo "cold make book (after install): $((t1 - t0)) s"
echo "warm make book: $((t2 - t1)) s"
python3 -c 'import json,sys; [print("  %s: %s s" % (k, v["seconds"])) for k, v in json.load(open(sys.argv[1])).items()]' _build/executed/quick/build.json
