#!/usr/bin/env bash
# Best-of-N on the held-out 20% of oasst1_zh (human-ranked; the same split as benchmarks/leaderboard.sh):
# pick one response per prompt with each scorer (length, zero-shot similarity, the m3e-small RMs trained on
# oasst1_zh train and on gpt4_comparison_zh), then measure the picks against the human ranks over
# n = 1, 2, 4, 8, 10 candidates. The import lists each prompt's responses best first, so the candidates
# are a seeded random draw (--sample random), never the first n.
#
# usage: bash benchmarks/bon_curve.sh [OUT_DIR]   (reads ../shared/data beside the repository)
#   RMS=runs/leaderboard   the folder holding rm-human and rm-ai (made by benchmarks/leaderboard.sh)
#   SEED=0 MAXLEN=256      the draw's seed; max tokens per (prompt, response), as the leaderboard
#   CHEEMS=cheems PYTHON=python   the command and the Python to run (word-split: "python -m cheems" works)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${CHEEMS_SHARED_DATA:-../shared/data}
OUT=${1:-runs/bon}
RMS=${RMS:-runs/leaderboard}
SEED=${SEED:-0}
MAXLEN=${MAXLEN:-256}
CHEEMS=${CHEEMS:-.venv/bin/cheems}
PYTHON=${PYTHON:-.venv/bin/python}
[ -d "$DATA/oasst1_zh" ] || { echo "no data at $DATA (the team checkout has ../shared/data)" >&2; exit 1; }
[ -f "$RMS/rm-human/config.json" ] && [ -f "$RMS/rm-ai/config.json" ] || {
  echo "no trained RMs in $RMS (run benchmarks/leaderboard.sh first, or set RMS)" >&2; exit 1; }
mkdir -p "$OUT"
run() { echo "+ cheems $*"; $CHEEMS "$@"; }

# 6 prompts of oasst1_zh rank one reply twice (ranks 1 and 2): skipped, and listed
run import ranked "$DATA/oasst1_zh/oaast_rm_zh.json" -o "$OUT/oasst1.jsonl" --skip-invalid
run split "$OUT/oasst1.jsonl" --train "$OUT/human.jsonl" --test "$OUT/oasst1-test.jsonl"
jsons=()
for scorer in length similarity:m3e-small "$RMS/rm-human" "$RMS/rm-ai"; do
  slug=$(basename "$scorer" | tr ':/' '--')
  run bon "$OUT/oasst1-test.jsonl" --model "$scorer" --sample random --seed "$SEED" --max-length "$MAXLEN" \
    -o "$OUT/picks.$slug.jsonl" --output-json "$OUT/bon.$slug.json" >/dev/null
  jsons+=("$OUT/bon.$slug.json")
done
$PYTHON benchmarks/bon_curve.py "${jsons[@]}" --names "length" "similarity:m3e-small" "RM (human)" "RM (AI)" \
  --plot "$OUT/bon-oasst1.png"
