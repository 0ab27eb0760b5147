#!/usr/bin/env bash
# Table-4-style ablation (paper part 3.5): the same backbone trained on each preference subset,
# evaluated on the held-out oasst1_zh split (20% of prompts, `cheems split` seed 0).
#
#   human         oasst1_zh train split (human-ranked, 2-10 replies per prompt)
#   ai            gpt4_comparison_zh (AI-labelled pairs; the paper's "judge subset")
#   ai+debias     ai after `cheems curate debias`
#   ai+distant    ai after `cheems curate distant` with the human-trained RM (GOLD_RM)
#   ai+all        ai after filter -> distant -> debias
#   human+ai-all  human + ai+all (the paper's final recipe)
#
# usage: bash benchmarks/ablation.sh [OUT_DIR]        (reads ../shared/data beside the repository)
#   GOLD_RM=DIR    a reward model trained on the human split, for distant supervision
#                  (default: trained here with `cheems train` defaults, 2 epochs)
#   EPOCHS=1 MAXLEN=256   training settings of the ablation rows
#   CHEEMS=cheems         the command to run
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${CHEEMS_SHARED_DATA:-../shared/data}
OUT=${1:-runs/ablation}
EPOCHS=${EPOCHS:-1}
MAXLEN=${MAXLEN:-256}
CHEEMS=${CHEEMS:-.venv/bin/cheems}
[ -d "$DATA/oasst1_zh" ] || { echo "no data at $DATA (the team checkout has ../shared/data)" >&2; exit 1; }
mkdir -p "$OUT"
run() { echo "+ cheems $*"; "$CHEEMS" "$@"; }

# 6 prompts of oasst1_zh rank one reply twice (ranks 1 and 2): skipped, and listed
run import ranked "$DATA/oasst1_zh/oaast_rm_zh.json" -o "$OUT/oasst1.jsonl" --skip-invalid
run split "$OUT/oasst1.jsonl" --train "$OUT/human.jsonl" --test "$OUT/test.jsonl"
# 20 rows of gpt4_comparison_zh have chosen == rejected: skipped, and listed
run import pairwise "$DATA/gpt4_comparison_zh/comparison_gpt4_data_zh.first2403.json" -o "$OUT/ai.jsonl" --skip-invalid 2>"$OUT/ai.skipped.txt"

if [ -z "${GOLD_RM:-}" ]; then
  run train --data "$OUT/human.jsonl" --output "$OUT/rm-gold" --no-progress
  GOLD_RM=$OUT/rm-gold
fi
run score --model "$GOLD_RM" --bench "$OUT/ai.jsonl" -o "$OUT/ai.gold-scores.jsonl"

# imported pairs carry source "import": that is the AI-labelled source to filter here
run curate debias "$OUT/ai.jsonl" -o "$OUT/ai+debias.jsonl" --seed 0 --report-json "$OUT/ai+debias.report.json"
run curate distant "$OUT/ai.jsonl" --scores "$OUT/ai.gold-scores.jsonl" --source import -o "$OUT/ai+distant.jsonl" \
  --report-json "$OUT/ai+distant.report.json"
run curate filter "$OUT/ai.jsonl" -o "$OUT/ai.filtered.jsonl" --report-json "$OUT/ai.filtered.report.json"
run curate distant "$OUT/ai.filtered.jsonl" --scores "$OUT/ai.gold-scores.jsonl" --source import -o "$OUT/ai.fd.jsonl"
run curate debias "$OUT/ai.fd.jsonl" -o "$OUT/ai+all.jsonl" --seed 0 --report-json "$OUT/ai+all.report.json"

train_and_eval() {  # NAME DATA...
  local name=$1; shift
  local args=()
  for f in "$@"; do args+=(--data "$f"); done
  run train "${args[@]}" --output "$OUT/rm-$name" --epochs "$EPOCHS" --max-length "$MAXLEN" --no-progress
  run eval --bench "$OUT/test.jsonl" --model "$OUT/rm-$name" --output-json "$OUT/metrics-$name.json" --max-length "$MAXLEN"
}
train_and_eval human "$OUT/human.jsonl"
train_and_eval ai "$OUT/ai.jsonl"
train_and_eval ai+debias "$OUT/ai+debias.jsonl"
train_and_eval ai+distant "$OUT/ai+distant.jsonl"
train_and_eval ai+all "$OUT/ai+all.jsonl"
train_and_eval human+ai-all "$OUT/human.jsonl" "$OUT/ai+all.jsonl"
run eval --bench "$OUT/test.jsonl" --model length --output-json "$OUT/metrics-length.json"

OUT=$OUT .venv/bin/python - <<'EOF'
import json, os
from pathlib import Path

out = Path(os.environ["OUT"])
print("| training set | prompts | pairs | held-out accuracy | held-out exact match | (acc + exact) / 2 |")
print("|---|---:|---:|---:|---:|---:|")
for name in ("length", "human", "ai", "ai+debias", "ai+distant", "ai+all", "human+ai-all"):
    test = json.loads((out / f"metrics-{name}.json").read_text())["subsets"]["test"]
    data = {} if name == "length" else json.loads((out / f"rm-{name}" / "metrics.json").read_text())["data"]
    print(f"| {name if data else 'length baseline (no training)'} | {data.get('prompts_with_pairs', '')} | "
          f"{data.get('pairs', '')} | {test['accuracy']:.3f} | {test['exact_match']:.3f} | "
          f"{(test['accuracy'] + test['exact_match']) / 2:.3f} |")
EOF
