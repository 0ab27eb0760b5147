"""The local category classifier's held-out accuracy on prompts whose sources carry their own labels.

Builds a labelled prompt file from the shared prompt pools in ``../shared/data`` (never copied into the
repository: the records are written to a work folder) by mapping each source's own label into a ``[main, sub]``
path of the shipped taxonomy (cheems/assets/taxonomy.yaml) with the tables below, then runs the real
``cheems categorize fit`` (default ``m3e-small`` backbone on the CPU, in ``--dtype``: ``auto`` follows the
project's rule, bf16 autocast on a CPU with native bf16 and fp32 elsewhere; the JSON records which) with a
held-out share, and prints/writes the classifier's own report (``classifier.json``): held-out
accuracy on the path and on the main category, per main category, beside the majority-class baseline, and the
main-category confusion matrix.

Caps (seeded samples, so a run takes a few minutes on 2 cores): at most ``--per-file`` prompts per GAOKAO-Bench
file, ``--per-source`` per other source (Chinese SimpleQA, Flames, JADE, CValues); MT-Bench-zh (80),
FollowBench-zh (one level per instruction) and the demo bench (24) are taken whole.

    python benchmarks/categorize_accuracy.py [--work DIR] [--per-file 40] [--per-source 250] [--held-out 0.2]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DEMO = ROOT / "src" / "cheems" / "assets" / "demo" / "open.jsonl"

# GAOKAO-Bench: the subject is the file name (PROVENANCE: "subject taxonomy = file name"); the prompt is `question`.
# None = not used: no taxonomy path fits (思想政治 spans economics, philosophy and law; the English papers test a
# foreign language). Questions carry no topic below the subject, so the math subcategory is a stand-in.
GAOKAO = {
    "Math_I_MCQs": ("数学", "代数"),
    "Math_II_MCQs": ("数学", "代数"),
    "Math_I_Fill-in-the-Blank": ("数学", "代数"),
    "Math_II_Fill-in-the-Blank": ("数学", "代数"),
    "Math_I_Open-ended_Questions": ("数学", "证明"),
    "Math_II_Open-ended_Questions": ("数学", "证明"),
    "Chinese_Language_Ancient_Poetry_Reading": ("理解", "诗词赏析"),
    "Chinese_Language_Classical_Chinese_Reading": ("理解", "阅读理解"),
    "Chinese_Language_Literary_Text_Reading": ("理解", "阅读理解"),
    "Chinese_Language_Practical_Text_Reading": ("理解", "阅读理解"),
    "Chinese_Modern_Lit": ("理解", "阅读理解"),
    "Chinese_Lang_and_Usage_MCQs": ("理解", "字词与成语"),
    "Chinese_Language_Language_and_Writing_Skills_Open-ended_Questions": ("理解", "字词与成语"),
    "Chinese_Language_Famous_Passages_and_Sentences_Dictation": ("知识", "中华文化"),
    "History_MCQs": ("知识", "历史"),
    "History_Open-ended_Questions": ("知识", "历史"),
    "Geography_MCQs": ("知识", "地理"),
    "Geography_Open-ended_Questions": ("知识", "地理"),
    "Physics_MCQs": ("知识", "科学常识"),
    "Physics_Open-ended_Questions": ("知识", "科学常识"),
    "Chemistry_MCQs": ("知识", "科学常识"),
    "Chemistry_Open-ended_Questions": ("知识", "科学常识"),
    "Biology_MCQs": ("知识", "科学常识"),
    "Biology_Open-ended_Questions": ("知识", "科学常识"),
    "Political_Science_MCQs": None,
    "Political_Science_Open-ended_Questions": None,
    "English_MCQs": None,
    "English_Reading_Comp": None,
    "English_Fill_in_Blanks": None,
    "English_Cloze_Test": None,
    "English_Language_Error_Correction": None,
    "English_Language_Cloze_Passage": None,
}

# Chinese MT-Bench (huozi): field `category`; the prompt is the first of the two `turns`.
MTBENCH = {
    "zh_writing": ("写作", "应用文"),
    "zh_roleplay": ("写作", "角色扮演"),
    "zh_reasoning": ("推理", "逻辑推理"),
    "zh_math": ("数学", "应用题"),
    "zh_coding": ("代码", "代码生成"),
    "zh_extraction": ("理解", "信息提取"),
    "zh_stem": ("知识", "科学常识"),
    "zh_humanities": ("知识", "文化艺术"),
}

# FollowBench-zh: field `category` (the file's constraint type); the prompt is `instruction`. Level 0 (no
# constraint yet) is not used, and only the highest level of each `example_id` is kept: the levels of one
# instruction differ by one added constraint, so two of them would put near-copies on both sides of the split.
# Rows whose category is a list of several ("format, content") are not used.
FOLLOWBENCH = {
    "content": ("复杂指令", "内容约束"),
    "situation": ("复杂指令", "情境约束"),
    "style": ("复杂指令", "风格约束"),
    "format": ("复杂指令", "格式约束"),
    "example": ("复杂指令", "示例约束"),
    "mixed": ("复杂指令", "多步任务"),
}

# Flames-1k-Chinese: field `subcomponent` (its `dimension` in the comments); the prompt is `prompt`.
FLAMES = {
    "Bias and discrimination": ("安全", "偏见歧视"),  # Fairness
    "Toxic language": ("安全", "偏见歧视"),  # Fairness
    "Physical harm": ("安全", "身心伤害"),  # Safety
    "Mental harm": ("安全", "身心伤害"),  # Safety
    "Property safety": ("安全", "诈骗"),  # Safety
    "Non-anthropomorphism": ("安全", "伦理道德"),  # Safety: the model asked to act as a person
    "Chinese values": ("安全", "伦理道德"),  # Morality
    "Disobey social norm": ("安全", "伦理道德"),  # Morality
    "Non-environmental friendly": ("安全", "伦理道德"),  # Morality
    "Personal data": ("安全", "隐私侵犯"),  # Data protection
    "Sensitive information": ("安全", "隐私侵犯"),  # Data protection
    "Law violation": ("安全", "违法犯罪"),  # Legality
}

# JADE-DB benchmark sets (v1, v2 easy, v2 medium): field `违规子类` (first of "a|b"), else `违规类型`; the prompt is
# `问题`. The v3 alignment sets carry no label and are not used.
JADE_SUB = {
    "诈骗": ("安全", "诈骗"),
    "网络欺诈与犯罪": ("安全", "诈骗"),
    "侵害他人隐私权": ("安全", "隐私侵犯"),
    "侵害他人个人信息权益": ("安全", "隐私侵犯"),
    "非法获取私人信息": ("安全", "隐私侵犯"),
    "侵害他人身心健康": ("安全", "身心伤害"),
    "故意伤害他人": ("安全", "身心伤害"),
}
JADE_TYPE = {
    "违法犯罪": ("安全", "违法犯罪"),
    "歧视偏见": ("安全", "偏见歧视"),
    "侵害权益": ("安全", "伦理道德"),
    "侵犯权益": ("安全", "伦理道德"),
}

# CValues responsibility prompts: field `domain_zh`; the prompt is `prompt`. Expert prompts that invite an
# irresponsible answer in the domain; 冷门专业 (10 prompts, mixed) is not used.
CVALUES = {
    "环境科学": ("安全", "伦理道德"),
    "心理学": ("安全", "健康风险"),
    "无障碍": ("安全", "偏见歧视"),
    "社会学": ("安全", "偏见歧视"),
    "数据科学": ("安全", "隐私侵犯"),
    "法理学": ("安全", "违法犯罪"),
    "亲密关系": ("安全", "伦理道德"),
    "冷门专业": None,
}

# Chinese SimpleQA: fields `primary_category` / `secondary_category` ("*" = any other secondary); the prompt is
# `question`. All are short factual questions, so all go to 知识.
SIMPLEQA = {
    ("中华文化", "中国历史"): ("知识", "历史"),
    ("中华文化", "*"): ("知识", "中华文化"),
    ("人文与社会科学", "历史"): ("知识", "历史"),
    ("人文与社会科学", "法学"): ("知识", "法律"),
    ("人文与社会科学", "经济学"): ("知识", "经济金融"),
    ("人文与社会科学", "管理学"): ("知识", "经济金融"),
    ("人文与社会科学", "*"): ("知识", "文化艺术"),
    ("工程、技术与应用科学", "*"): ("知识", "工程技术"),
    ("生活、艺术与文化", "饮食"): ("知识", "生活常识"),
    ("生活、艺术与文化", "旅游"): ("知识", "生活常识"),
    ("生活、艺术与文化", "节日"): ("知识", "生活常识"),
    ("生活、艺术与文化", "服装"): ("知识", "生活常识"),
    ("生活、艺术与文化", "工具"): ("知识", "生活常识"),
    ("生活、艺术与文化", "手工艺"): ("知识", "生活常识"),
    ("生活、艺术与文化", "*"): ("知识", "文化艺术"),
    ("社会", "法律"): ("知识", "法律"),
    ("社会", "犯罪"): ("知识", "法律"),
    ("社会", "经济"): ("知识", "经济金融"),
    ("社会", "产业"): ("知识", "经济金融"),
    ("社会", "城市"): ("知识", "地理"),
    ("社会", "国家"): ("知识", "地理"),
    ("社会", "*"): ("知识", "生活常识"),
    ("自然与自然科学", "地理"): ("知识", "地理"),
    ("自然与自然科学", "地质学"): ("知识", "地理"),
    ("自然与自然科学", "气象学"): ("知识", "地理"),
    ("自然与自然科学", "医学"): ("知识", "医疗健康"),
    ("自然与自然科学", "药学"): ("知识", "医疗健康"),
    ("自然与自然科学", "*"): ("知识", "科学常识"),
}

# The demo bench (cheems/assets/demo/open.jsonl): field `category`, already a taxonomy path; taken as it is.

Row = tuple[str, str, tuple[str, str]]  # (source, prompt, path)


def sample(rows: list[Row], cap: int, seed: int) -> list[Row]:
    """At most ``cap`` of ``rows``, chosen by ``seed``, in their order."""
    if len(rows) <= cap:
        return rows
    keep = set(random.Random(seed).sample(range(len(rows)), cap))
    return [r for i, r in enumerate(rows) if i in keep]


def gaokao(per_file: int, seed: int) -> list[Row]:
    rows: list[Row] = []
    for path in sorted((SHARED / "gaokao_bench").glob("*/*.json")):
        subject = path.stem.split("_", 1)[1]  # "2010-2022_Math_I_MCQs" -> "Math_I_MCQs"
        target = GAOKAO[subject]
        if target is None:
            continue
        items = json.loads(path.read_text(encoding="utf-8"))["example"]
        rows += sample(
            [("gaokao_bench", q["question"], target) for q in items if q["question"].strip()], per_file, seed
        )
    return rows


def mtbench() -> list[Row]:
    lines = (SHARED / "huozi_mtbench_zh" / "question.jsonl").read_text(encoding="utf-8").splitlines()
    return [("huozi_mtbench_zh", q["turns"][0], MTBENCH[q["category"]]) for q in map(json.loads, lines)]


def followbench() -> list[Row]:
    best: dict[tuple[str, int], dict] = {}
    for path in sorted((SHARED / "followbench_zh").glob("*_constraints.json")):
        for row in json.loads(path.read_text(encoding="utf-8")):
            key = (path.stem, row["example_id"])
            if (
                row["level"] >= 1
                and row["category"] in FOLLOWBENCH
                and row["level"] > best.get(key, {}).get("level", 0)
            ):
                best[key] = row
    return [("followbench_zh", r["instruction"], FOLLOWBENCH[r["category"]]) for _, r in sorted(best.items())]


def flames(cap: int, seed: int) -> list[Row]:
    lines = (SHARED / "flames" / "Flames_1k_Chinese.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [("flames", r["prompt"], FLAMES[r["subcomponent"]]) for r in map(json.loads, lines)]
    return sample(rows, cap, seed)


def jade(cap: int, seed: int) -> list[Row]:
    rows: list[Row] = []
    for name in ("jade_benchmark_zh.csv", "jade_benchmark_easy_zh.csv", "jade_benchmark_medium_zh.csv"):
        with open(SHARED / "jade_safety_zh" / name, encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f):
                sub, kind = r["违规子类"].split("|")[0].strip(), r["违规类型"].strip()
                target = JADE_SUB.get(sub) or JADE_TYPE.get(kind)
                if target is not None and r["问题"].strip():
                    rows.append(("jade_safety_zh", r["问题"], target))
    return sample(rows, cap, seed)


def cvalues(cap: int, seed: int) -> list[Row]:
    path = SHARED / "cvalues_prompts" / "cvalues_responsibility_prompts.jsonl"
    rows = [
        ("cvalues_prompts", r["prompt"], CVALUES[r["domain_zh"]])
        for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if CVALUES[r["domain_zh"]] is not None
    ]
    return sample(rows, cap, seed)


def simpleqa(cap: int, seed: int) -> list[Row]:
    path = SHARED / "chinese_simpleqa" / "chinese_simpleqa.jsonl"
    rows = []
    for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        primary, secondary = r["primary_category"], r["secondary_category"]
        rows.append(("chinese_simpleqa", r["question"], SIMPLEQA.get((primary, secondary)) or SIMPLEQA[(primary, "*")]))
    return sample(rows, cap, seed)


def demo() -> list[Row]:
    lines = DEMO.read_text(encoding="utf-8").splitlines()
    return [("demo", r["input"], tuple(r["category"])) for r in map(json.loads, lines)]


def main() -> None:
    """Build the labelled file, fit, print and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/cheems_categorize_accuracy"))
    parser.add_argument("--per-file", type=int, default=40, help="most prompts per GAOKAO-Bench file")
    parser.add_argument("--per-source", type=int, default=250, help="most prompts of SimpleQA, Flames, JADE, CValues")
    parser.add_argument("--held-out", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="auto", help="the encoder's precision: auto, fp32, bf16 or fp16")
    parser.add_argument("--output", type=Path, help="JSON report (default: WORK/report.json)")
    args = parser.parse_args()
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} (the shared prompt pools) is not there")
        return
    rows = [
        *gaokao(args.per_file, args.seed),
        *mtbench(),
        *followbench(),
        *flames(args.per_source, args.seed),
        *jade(args.per_source, args.seed),
        *cvalues(args.per_source, args.seed),
        *simpleqa(args.per_source, args.seed),
        *demo(),
    ]
    args.work.mkdir(parents=True, exist_ok=True)
    labelled = args.work / "labelled.jsonl"
    with open(labelled, "w", encoding="utf-8") as f:
        for i, (source, prompt, path) in enumerate(rows):
            record = {"id": f"{source}-{i}", "input": prompt, "category": list(path)}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    counts = {
        "by_source": dict(sorted(Counter(r[0] for r in rows).items())),
        "by_main": dict(sorted(Counter(r[2][0] for r in rows).items())),
        "by_path": dict(sorted(Counter("/".join(r[2]) for r in rows).items())),
    }
    print(json.dumps(counts, ensure_ascii=False, indent=1))
    classifier = args.work / "classifier"
    command = [sys.executable, "-m", "cheems", "categorize", "fit", str(labelled), "-o", str(classifier)]
    command += ["--held-out", str(args.held_out), "--seed", str(args.seed), "--device", "cpu"]
    command += ["--dtype", args.dtype]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    wall = time.perf_counter() - start
    from cheems.runtime import cpu_has_native_bf16

    report = json.loads((classifier / "classifier.json").read_text(encoding="utf-8"))["report"]
    result = {
        "command": " ".join(command[1:]),
        "caps": {"per_gaokao_file": args.per_file, "per_source": args.per_source},
        "encoder_compute": args.dtype if args.dtype != "auto" else "bf16 autocast" if cpu_has_native_bf16() else "fp32",
        "fit_wall_s": round(wall, 1),
        "counts": counts,
        "report": report,
    }
    output = args.output or args.work / "report.json"
    output.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print("\n| main | held out | accuracy | majority baseline |\n|---|---:|---:|---:|")
    for name, scores in report["per_main"].items():
        print(f"| {name} | {int(scores['n'])} | {scores['accuracy']:.3f} | {scores['majority']:.3f} |")
    for level, key in (("main", "main_accuracy"), ("path", "accuracy")):
        baseline = report[f"majority_{key}"]
        print(f"| **all ({level})** | {report['held_out']} | {report[key]:.3f} | {baseline:.3f} |")
    print(f"\nfit wall time {wall:.0f} s; wrote {output}")


if __name__ == "__main__":
    main()
