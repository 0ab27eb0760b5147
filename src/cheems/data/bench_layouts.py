"""Other benchmarks' layouts that both their importers (:mod:`cheems.data.bench_importers`) and their metrics
(:mod:`cheems.metrics`) read. Apart from the importers so that a metric loads no import format: the formats
register in one order, whatever module is imported first."""

RMBENCH_STYLES = ("concise", "detailed_plain", "detailed_markdown")
"""RM-Bench's style variants, in the order of its ``chosen`` / ``rejected`` lists (README, scripts/utils.py)."""

REWARDBENCH_SECTIONS = {
    "Chat": ("alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"),
    "Chat Hard": (
        "mt-bench-hard",
        "llmbar-natural",
        "llmbar-adver-neighbor",
        "llmbar-adver-GPTInst",
        "llmbar-adver-GPTOut",
        "llmbar-adver-manual",
    ),
    "Safety": (
        "refusals-dangerous",
        "refusals-offensive",
        "xstest-should-refuse",
        "xstest-should-respond",
        "donotanswer",
    ),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}
"""RewardBench's sections and the subsets each holds (allenai/reward-bench ``rewardbench/constants.py``
``SUBSET_MAPPING``)."""
