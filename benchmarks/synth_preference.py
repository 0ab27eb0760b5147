"""A synthetic CheemsPreference-shaped record file of any scale, for the data-step benchmarks.

Each record: a Chinese prompt (~190 characters) in one of the paper's main categories (with a
subcategory), 5 or 6 responses of realistic Chinese length (~440 characters, log-normal spread, a
few very long ones), and every one of the C(n, 2) pairs judged once by an LLM judge
(``source: judge``, ``annotator``, the ``shown`` order), about 10% ties. Labels follow a latent
quality per response plus judge noise and a mild preference for the longer answer, so ``resolve``
meets real conflicts and ``curate debias`` has a length bias to remove. Text is sentences drawn
from a pool built once from templates, so no response repeats itself (``curate filter`` keeps
nearly all of them) and generation stays fast.

Records are written one at a time (constant memory); the same seed gives the same bytes. The
default is paper size: 27,861 prompts (``--scale 10`` for 10x).

    python benchmarks/synth_preference.py OUT.jsonl [--prompts 27861] [--scale 1] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from itertools import combinations
from pathlib import Path

PAPER_PROMPTS = 27_861
CATEGORIES = {
    "理解": ["阅读理解", "摘要", "信息抽取"],
    "知识": ["历史", "地理", "生物", "法律常识"],
    "推理": ["逻辑推理", "常识推理"],
    "数学": ["应用题", "代数", "概率统计"],
    "代码": ["Python", "算法", "调试"],
    "安全": ["违法犯罪", "隐私", "偏见歧视"],
    "写作": ["议论文", "邮件", "故事创作"],
    "复杂指令": ["格式约束", "多步指令"],
}
JUDGES = ["gpt-4o-2024-08-06", "qwen2.5-72b-instruct", "deepseek-v2.5"]
MODELS = ["qwen2-72b-instruct", "glm-4-9b-chat", "yi-1.5-34b-chat", "deepseek-v2", "baichuan2-13b-chat", "gpt-4o-mini"]
TOPICS = (
    "城市交通 人工智能 气候变化 传统文化 家庭教育 远程办公 新能源汽车 食品安全 老龄化社会 网络安全 "
    "乡村振兴 数据隐私 在线教育 体育锻炼 睡眠健康 垃圾分类 短视频 古典诗词 宇宙探索 个人理财"
).split()
SUBJECTS = "我们 这个问题 相关研究 许多专家 实际情况 一般来说 从长远看 具体而言 换句话说 另一方面".split()
VERBS = "需要考虑 可以分为 主要取决于 往往涉及 直接影响 有助于理解 体现了 说明了 离不开 反映出".split()
OBJECTS = (
    "多方面的因素 成本与收益的平衡 个人与社会的关系 技术发展的速度 政策的连续性 资源的合理分配 "
    "长期的实践经验 清晰的评价标准 不同群体的需求 数据的可靠程度"
).split()
TAILS = (
    "因此需要具体问题具体分析 这一点在实践中尤为明显 这也是讨论的重点所在 值得进一步研究 "
    "但也存在一定的局限 可以通过例子加以说明 对于初学者尤其重要 在不同场景下表现不同"
).split()
ASKS = (
    "请详细分析 请简要说明 请结合实例解释 请分步骤回答 请写一篇短文讨论 请比较两种观点并给出结论 "
    "请列出要点并说明理由 请用通俗的语言解释"
).split()


def sentence_pool(rng: random.Random, size: int = 6000) -> list[str]:
    """``size`` distinct Chinese sentences (~20-40 characters) from the word lists above."""
    pool: set[str] = set()
    while len(pool) < size:
        topic = rng.choice(TOPICS)
        pool.add(
            f"{rng.choice(SUBJECTS)}，{topic}{rng.choice(VERBS)}{rng.choice(OBJECTS)}，{rng.choice(TAILS)}。"
            if rng.random() < 0.6
            else f"以{topic}为例，{rng.choice(OBJECTS)}{rng.choice(VERBS)}{rng.choice(OBJECTS)}。"
        )
    return sorted(pool)


def text(rng: random.Random, pool: list[str], chars: int) -> str:
    """Distinct pool sentences, in paragraphs of 3-5, until the text reaches ``chars`` characters."""
    out: list[str] = []
    n = 0
    for i, s in enumerate(rng.sample(pool, k=max(1, chars // 18))):
        if n >= chars:
            break
        if i and i % rng.randint(3, 5) == 0:
            out.append("\n\n")
        out.append(s)
        n += len(s)
    return "".join(out)


def prompt(rng: random.Random, pool: list[str], index: int) -> tuple[str, list[str]]:
    """A ~190-character prompt and its category path."""
    main = rng.choice(list(CATEGORIES))
    sub = rng.choice(CATEGORIES[main])
    body = text(rng, pool, int(rng.gauss(140, 40)) if main != "复杂指令" else 190)
    ask = f"{rng.choice(ASKS)}（{sub}，第{index}题），回答不少于三段。"
    return f"{body}\n\n{ask}", [main, sub]


def response_chars(rng: random.Random) -> int:
    """Log-normal lengths, median ~350, mean ~440 with a 1% tail of very long ones (for the length filters)."""
    if rng.random() < 0.01:
        return rng.randint(2500, 9000)
    return max(20, int(rng.lognormvariate(math.log(340), 0.45)))


def comparisons(rng: random.Random, quality: dict[str, float], lengths: dict[str, int]) -> list[dict]:
    """Every pair judged once: latent quality + judge noise + a mild pull to the longer answer; ~10% ties."""
    out = []
    for a, b in combinations(quality, 2):
        margin = quality[a] - quality[b] + 0.3 * math.tanh((lengths[a] - lengths[b]) / 300) + rng.gauss(0, 0.6)
        label = "tie" if abs(margin) < 0.18 else ("a" if margin > 0 else "b")
        shown = "ab" if rng.random() < 0.5 else "ba"
        out.append({"a": a, "b": b, "label": label, "annotator": rng.choice(JUDGES), "source": "judge", "shown": shown})
    return out


def record(rng: random.Random, pool: list[str], index: int) -> dict:
    """One CheemsPreference-shaped record."""
    text_in, category = prompt(rng, pool, index)
    ids = [f"r{j}" for j in range(1, (6 if rng.random() < 0.29 else 5) + 1)]
    responses = [
        {"id": rid, "content": text(rng, pool, response_chars(rng)), "model": rng.choice(MODELS)} for rid in ids
    ]
    quality = {rid: rng.gauss(0, 1) for rid in ids}
    lengths = {r["id"]: len(r["content"]) for r in responses}
    return {
        "id": f"synth-{index:08d}",
        "input": text_in,
        "category": category,
        "responses": responses,
        "comparisons": comparisons(rng, quality, lengths),
    }


def write(path: Path, prompts: int, seed: int) -> dict:
    """Stream ``prompts`` records to ``path``; returns counts and size."""
    rng = random.Random(seed)
    pool = sentence_pool(rng)
    n_responses = n_comparisons = n_ties = 0
    with path.open("w", encoding="utf-8") as f:
        for i in range(prompts):
            rec = record(rng, pool, i)
            n_responses += len(rec["responses"])
            n_comparisons += len(rec["comparisons"])
            n_ties += sum(c["label"] == "tie" for c in rec["comparisons"])
            f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
    return {
        "prompts": prompts,
        "responses": n_responses,
        "comparisons": n_comparisons,
        "ties": n_ties,
        "bytes": path.stat().st_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--prompts", type=int, default=PAPER_PROMPTS, help="prompts at scale 1 (paper: 27,861)")
    parser.add_argument("--scale", type=int, default=1, help="multiplies --prompts (10: 10x paper scale)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    counts = write(args.output, args.prompts * args.scale, args.seed)
    counts["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
