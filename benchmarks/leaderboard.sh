#!/usr/bin/env bash
# Leaderboards in the shape of the paper's Tables 2 and 3, with bootstrap confidence intervals, for every
# scorer that runs on this machine: the length baseline, zero-shot embedding similarity, the untrained
# m3e-small backbone, and m3e-small reward models trained on a human-ranked and an AI-labelled set
# (Table 3: preference datasets compared through the RMs trained on them). Two benches: the held-out 20%
# of oasst1_zh (human-ranked) and the shipped demo bench (open + human). Ends with `cheems compare` of
# the human-trained RM against the length baseline on the held-out split.
#
# usage: bash benchmarks/leaderboard.sh [OUT_DIR]      (reads ../shared/data beside the repository)
#   EPOCHS=1 MAXLEN=256   training settings (as the ablation)
#   CHEEMS=cheems         the command to run
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${CHEEMS_SHARED_DATA:-../shared/data}
OUT=${1:-runs/leaderboard}
EPOCHS=${EPOCHS:-1}
MAXLEN=${MAXLEN:-256}
CHEEMS=${CHEEMS:-.venv/bin/cheems}
DEMO=src/cheems/assets/demo
[ -d "$DATA/oasst1_zh" ] || { echo "no data at $DATA (the team checkout has ../shared/data)" >&2; exit 1; }
mkdir -p "$OUT"
run() { echo "+ cheems $*"; "$CHEEMS" "$@"; }

# 6 prompts of oasst1_zh rank one reply twice (ranks 1 and 2): skipped, and listed
run import ranked "$DATA/oasst1_zh/oaast_rm_zh.json" -o "$OUT/oasst1.jsonl" --skip-invalid
run split "$OUT/oasst1.jsonl" --train "$OUT/human.jsonl" --test "$OUT/oasst1-test.jsonl"
run import pairwise "$DATA/gpt4_comparison_zh/comparison_gpt4_data_zh.first2403.json" -o "$OUT/ai.jsonl" --skip-invalid 2>"$OUT/ai.skipped.txt"
for set in human ai; do
  [ -f "$OUT/rm-$set/config.json" ] || run train --data "$OUT/$set.jsonl" --output "$OUT/rm-$set" --epochs "$EPOCHS" --max-length "$MAXLEN" --no-progress
done

scorers=(length similarity:m3e-small m3e-small "$OUT/rm-human" "$OUT/rm-ai")
names=("length (longer wins)" "similarity:m3e-small (zero-shot)" "m3e-small, untrained head" "m3e-small RM trained on oasst1_zh (human)" "m3e-small RM trained on gpt4_comparison_zh (AI)")
for bench in oasst1 demo; do
  if [ "$bench" = oasst1 ]; then files=(--bench "$OUT/oasst1-test.jsonl"); else files=(--bench "$DEMO/open.jsonl" --bench "$DEMO/human.jsonl"); fi
  jsons=(); flags=()
  for i in "${!scorers[@]}"; do
    slug=$(basename "${scorers[$i]}" | tr ':/' '--')
    run eval "${files[@]}" --model "${scorers[$i]}" --max-length "$MAXLEN" --output-json "$OUT/$bench.$slug.json" --details "$OUT/$bench.$slug.details.jsonl" >/dev/null
    jsons+=("$OUT/$bench.$slug.json"); flags+=(--name "${names[$i]}")
  done
  run leaderboard "${jsons[@]}" "${flags[@]}" -o "$OUT/leaderboard-$bench.md"
  run leaderboard "${jsons[@]}" "${flags[@]}" -o "$OUT/leaderboard-$bench.html" >/dev/null
done
run compare "$OUT/oasst1.rm-human.details.jsonl" "$OUT/oasst1.length.details.jsonl" --output-json "$OUT/compare-human-vs-length.json"
run compare "$OUT/oasst1.rm-human.details.jsonl" "$OUT/oasst1.rm-ai.details.jsonl" --output-json "$OUT/compare-human-vs-ai.json"
