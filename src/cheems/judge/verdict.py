"""Strict verdict parsing: a judge's reply -> "A", "B", "C", or a reason why it has no verdict.

The rule. Reasoning is removed first (``<think>`` blocks, everything before a lone ``</think>``,
everything after an unclosed ``<think>``); a label in reasoning is never taken. The rest is cut
into sentences. A sentence *states* a label when its deciding clause (the last clause that has one
of these forms; what follows it, such as a reason, may not name the other label) has one of:

- ``BARE``: the label alone, decorated or not: ``A``, ``**A**``, ``[[A]]``, ``\\boxed{A}``, ``回答A``, ``综上，A``;
- ``ANNOUNCED``: a word that announces the answer, then the label: ``答案：A``, ``最终答案是 B``,
  ``我选择A``, ``The answer is B``, ``Final verdict: [[A]]``, ``I choose A``;
- ``BETTER``: one answer called the better one (A or B only): ``回答A更好``, ``Response B is better``;
  or the better one named: ``更好的是：A``, ``The better response is B``, ``更好的是：C`` (C: neither);
- ``TIE``: the two called even, then C: ``两个回答质量相当：C``, ``平局：C``, ``Tie: C``;
- ``COMPARED``: the two compared: ``回答A优于回答B``, ``A比B好``, ``A不如B`` (-> B), ``A is better than B``.

The verdict is the label stated by the last sentence that names a label or, for replies that put
the answer first (``A\\n\\n理由：……``), by the first one. It is refused when:

- two sentences state different labels, or the reply takes its answer back (``不对``, ``wait``): conflicting;
- the verdict is unsure or conditional (``可能是A``, ``如果只看格式，A更好``), or a hedge or a nod
  to the other answer follows it (``各有优劣``, ``A也可以``): hedge. Calling the two even is the
  reason for C, not a hedge of it (``C，两个回答各有千秋``);
- the final sentence names two labels without deciding (``A或B``): ambiguous;
- a label is named but no sentence states it by the forms above (``我认为 A``, ``C更好``): unclear;
  no label named at all: no_label.

Callers re-ask the judge and finally record the pair as failed with the reason.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from cheems.llm.replies import REPLY_REASONS, failure_text, strip_reasoning

# Reason code -> what it means, for reports.
FAILURE_REASONS = {
    **REPLY_REASONS,
    "no_label": "the answer names none of A, B or C",
    "unclear": "A, B or C is named, but no sentence at the start or end states it as the verdict",
    "ambiguous": "the final sentence names more than one label without deciding",
    "conflicting": "the reply states different answers, or takes its answer back",
    "hedge": "the answer is unsure, conditional, or followed by a hedge",
}

# ---------------------------------------------------------------- reasoning


# ---------------------------------------------------------------- the named forms (on NFKC text)

# Forms are matched on a clause with its decoration (``**``, brackets, quotes) turned into spaces and
# runs of spaces collapsed, so a pattern never has two ways to read the same characters: matching
# takes linear time whatever a server sends (nested optional spaces once took minutes on 5,000 spaces).
_DECORATION = re.compile(r"[*_\"“”‘’\[\](){}「」『』《》【】]")  # not ', which I'd and it's need
MAX_CLAUSE = 300  # characters; a longer clause is reasoning, not an answer
_D = r"\s?"
_NOUN = (
    r"(?:(?:第[一二]个回答|回答|答案|选项|助手"
    r"|(?i:the\s(?:first|second)\s(?:response|answer|one)|response|answer|assistant|option|candidate))\s?)?"
)


def _label(name: str, allowed: str = "ABC") -> str:
    return rf"{_D}{_NOUN}{_D}(?P<{name}>[{allowed}]){_D}"


_CONNECTOR = (
    r"(?:但是?|不过|然而|因此|所以|故而?|因而|于是|综上所述|综上|总之|总的来说|总体(?:来说|而言|来看|上)?"
    r"|整体(?:来说|而言|来看|上)?|综合(?:来看|考虑|而言|比较|评估|以上)?|相比之下|比较之下|对比之下"
    r"|经过(?:仔细)?(?:比较|对比|分析|评估)|最终|最后|显然|很明显|明显"
    r"|(?i:so|thus|therefore|hence|overall|in\s+conclusion|in\s+summary|all\s+in\s+all|ultimately|finally"
    r"|however|but|clearly|in\s+short|consequently))"
)
_THINK = (
    r"(?:(?:我|笔者|我们)?(?:认为|觉得|判断|判定|相信|的结论是|的判断是)"
    r"|(?i:I\s+(?:think|believe|judge|conclude|find|feel)(?:\s+that)?|I(?:'d|\s+would)\s+(?:say|argue)(?:\s+that)?"
    r"|in\s+my\s+(?:opinion|view|judge?ment)))"
)
_OPENER = rf"(?:{_CONNECTOR}\s?){{0,2}}(?:{_THINK}\s?)?"  # "但综合来看我认为……"
_ANNOUNCE = (
    r"(?:(?:(?:我|我们|本题)(?:给出|做出|作出)?的?)?(?:最终|最后)?的?(?:答案|结论|判断|裁决|(?:比较|对比|评估|评判|评审|判定)?结果"
    r"|(?:评审|评判|评价)?意见|评判|评审|评价|选择|输出|回答|决定|答)"
    r"|(?i:(?:my\s+|the\s+)?(?:final\s+)?(?:answer|verdict|choice|decision|conclusion|judge?ment|output|result"
    r"|selection|pick)))"
)
_COPULA = r"(?:\s?(?:[:=]|是|为|应该是|应是|应为|就是|(?i:is|would\sbe|will\sbe))\s?)*"
_CHOOSE = (
    r"(?:(?:我|本题|我们)?(?:会|最终|还是|应该|应当|应)?(?:选择|选|投给|投票给|推荐|判给)(?:的是)?"
    r"|(?:应该|应当|应)是"
    r"|(?i:(?:I|we)(?:'d|'ll|\s+would|\s+will)?\s+(?:choose|pick|select|prefer|go\s+with|vote\s+for)))"
)
_BETTER_WORD = (
    r"(?:更好|更优|更佳|较好|较优|更胜一筹|略胜一筹|胜出|获胜|更出色|更优秀|质量更高|表现更好|稍好|略好|更强"
    r"|好一些|更好一些|更好一点|要好|要好一些|为佳|更合适|胜|完胜|(?:更为?|更加|较为?)(?:出色|优秀|优质)|的?(?:整体)?(?:质量|水平)更高|的?(?:整体)?表现更好)"
)
# the answer as a whole, not a part
_WHOLE = r"(?:回答|答案|内容|代码|解释|解答|翻译|译文|文本|方案|分析|推理|论述|写作|作品)"
_ADVERB = r"(?:整体|总体|综合|明显|显然|稍微|略微?|确实|的确|相对|要|会)*"
_BETTER_ADJ = r"(?:更好|更优|更佳|较好|较优|最好|最佳|最优|更出色|更优秀|质量更高|表现更好|胜出|获胜)"
_BETTER_ONE = (
    rf"(?:{_BETTER_ADJ}(?:的(?:回答|答案|一个|一方)?|回答|答案)"
    r"|(?i:(?:the\s+)?(?:better|best|stronger|superior|preferred|winning)(?:\s+(?:response|answer|one|reply"
    r"|option|choice))?|(?:the\s+)?winner))"
)
# The two called even (the reason for C): "两个回答质量相当", "两者没有明显差异", "平局", "a tie".
_EVEN_WORD = (
    r"(?:质量|水平|表现|效果|整体|总体)?(?:基本|大致|大体|几乎)?(?:上)?(?:相当|相近|接近|差不多|不相上下|旗鼓相当"
    r"|一样好|同样好|一样|相同|持平|打平|难分高下|难分伯仲|没有(?:明显|太大|显著)?的?(?:差异|区别|差别|高下之分|优劣之分)"
    r"|无(?:明显|显著)?(?:差异|区别|差别))"
)
_TIE = (
    r"(?:(?:(?:这|两|这两|二)[个份]?(?:回答|答案)|两者|二者|双方|(?:回答)?A(?:和|与|跟)(?:回答)?B)?的?"
    rf"{_EVEN_WORD}(?:[、]?{_EVEN_WORD})?|平局|平手|打平"
    r"|(?i:(?:it'?s\s|it\sis\s)?a\s(?:tie|draw)|tie|draw|no\sclear\s(?:difference|winner)"
    r"|(?:both(?:\s(?:responses|answers))?\s(?:are\s)?)?(?:equally\s(?:good|bad|helpful)|about\sthe\ssame"
    r"|(?:of\s)?(?:similar|comparable|equal)\squality)))"
)
_EN_DEGREE = r"(?i:(?:clearly|slightly|much|significantly|definitely|overall|far|somewhat)\s+)?"
_EN_TAIL = r"(?:\s+(?i:overall|here|in\s+this\s+case))?"

# Each form: (name, pattern, which group holds the verdict). Matched against a whole clause.
_FORMS: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (name, re.compile(pattern), group)
    for name, pattern, group in (
        ("BARE", rf"^(?:{_CONNECTOR}\s?:?)?{_label('x')}$", "x"),
        ("ANNOUNCED", rf"^{_OPENER}{_ANNOUNCE}{_D}{_COPULA}{_label('x')}$", "x"),
        ("ANNOUNCED", rf"^{_OPENER}{_CHOOSE}{_COPULA}{_label('x')}$", "x"),
        ("BETTER", rf"^{_OPENER}{_BETTER_ONE}{_COPULA}{_label('x')}$", "x"),  # "更好的是：C": neither
        ("TIE", rf"^{_OPENER}{_TIE}{_COPULA}{_label('x', 'C')}$", "x"),
        ("BETTER", rf"^{_OPENER}{_label('x', 'AB')}(?:的{_WHOLE})?{_ADVERB}{_BETTER_WORD}$", "x"),
        ("BETTER", rf"^{_OPENER}{_label('x', 'AB')}(?:是|为){_BETTER_ADJ}的(?:回答|答案|一个|那个)?$", "x"),
        (
            "BETTER",
            (
                rf"^{_OPENER}{_label('x', 'AB')}(?i:'s\s(?:answer|response))?\s?(?i:is|was)\s+{_EN_DEGREE}"
                rf"(?i:better|superior|preferable|preferred|stronger|the\s+better\s+(?:one|response|answer|choice)"
                rf"|the\s+winner){_EN_TAIL}$"
            ),
            "x",
        ),
        ("BETTER", rf"^{_OPENER}{_label('x', 'AB')}(?i:'s\s(?:answer|response))?\s?(?i:wins|prevails){_EN_TAIL}$", "x"),
        (
            "COMPARED",
            (
                rf"^{_OPENER}{_label('x', 'AB')}(?:的(?:回答|表现|质量))?{_ADVERB}"
                rf"(?:优于|好于|胜于|胜过|强于|更胜于|略优于|稍优于|完胜){_label('y', 'AB')}$"
            ),
            "x",
        ),
        (
            "COMPARED",
            (
                rf"^{_OPENER}{_label('x', 'AB')}比{_label('y', 'AB')}{_ADVERB}(?:更|要|略|稍)?"
                rf"(?:好|优|优秀|出色|强|准确|完善|全面|合适)(?:一些|一点|得多|很多)?$"
            ),
            "x",
        ),
        (
            "COMPARED",
            rf"^{_OPENER}{_label('x', 'AB')}(?:不如|劣于|逊于|差于|弱于|比不上|逊色于){_label('y', 'AB')}$",
            "y",
        ),
        ("COMPARED", rf"^{_OPENER}{_label('x', 'AB')}比{_label('y', 'AB')}(?:更|要)?(?:差|弱|糟)$", "y"),
        ("COMPARED", rf"^{_OPENER}{_label('x', 'AB')}>{_label('y', 'AB')}$", "x"),  # "A > B"
        ("COMPARED", rf"^{_OPENER}{_label('x', 'AB')}<{_label('y', 'AB')}$", "y"),
        (
            "COMPARED",
            (
                rf"^{_OPENER}{_label('x', 'AB')}\s?(?:(?i:is|was)\s+{_EN_DEGREE}(?i:better\s+than|superior\s+to"
                rf"|stronger\s+than|preferable\s+to)|(?i:outperforms|beats|is\s+preferred\s+over))"
                rf"{_label('y', 'AB')}{_EN_TAIL}$"
            ),
            "x",
        ),
        (
            "COMPARED",
            (
                rf"^{_OPENER}{_label('x', 'AB')}\s?(?i:is|was)\s+{_EN_DEGREE}(?i:worse\s+than|inferior\s+to"
                rf"|weaker\s+than){_label('y', 'AB')}{_EN_TAIL}$"
            ),
            "y",
        ),
    )
)

_HEADED = re.compile(rf"^{_OPENER}{_ANNOUNCE}\s?[:=]\s?(.+)$")

# ---------------------------------------------------------------- hedges and take-backs

_CONDITIONAL = re.compile(r"如果|假如|假设|倘若|若是|要是|只看|仅看|单看|只从|仅从|单从|(?i:\bif\b|\bunless\b)")
_UNSURE = re.compile(
    r"不确定|不太确定|难以判断|无法判断|很难判断|难以确定|无法确定|很难说|不好说|难说|难分高下|难分伯仲"
    r"|难以取舍|难以抉择|说不准|取决于|视情况|看情况|倾向"
    r"|(?i:not\s+sure|unsure|hard\s+to\s+(?:say|tell)|difficult\s+to\s+(?:say|tell)"
    r"|can'?t\s+(?:decide|tell)|cannot\s+(?:decide|tell)|it\s+depends|\blean(?:s|ing)?\b)"
)
_MAYBE = re.compile(
    r"可能|也许|或许|大概|似乎|好像|(?i:\bmaybe\b|\bperhaps\b|\bprobably\b|\bpossibly\b|\bmight\b|\blikely\b)"
)
_CONCESSION = re.compile(
    r"各有优劣|各有千秋|各有所长|各有优缺点|都可以|也可以|也行|都不错|都行"
    r"|(?i:both\s+are\s+(?:fine|acceptable|good)|either\s+(?:one\s+)?(?:is|would\s+be)\s+fine"
    r"|both\s+have\s+(?:their\s+)?(?:merits|strengths))"
)
# Words calling the two even: a hedge of A or B, but the very reason of C.
_EVEN = re.compile(rf"{_CONCESSION.pattern}|难分高下|难分伯仲|难以取舍|难以抉择|不相上下|旗鼓相当")
_TAKE_BACK = re.compile(
    r"^\W*(?:不对(?!称)|等等|等一下|更正|纠正)|再想想|仔细想想|重新考虑|转念一想|重新评估"
    r"|(?i:^\W*(?:wait|correction)\b|on\s+second\s+thought|let\s+me\s+reconsider|scratch\s+that)"
)

# ---------------------------------------------------------------- sentences and clauses

_LETTER = re.compile(r"(?<![A-Za-z0-9_])[ABC](?![A-Za-z0-9_+#])")  # C++ and C# are languages, not labels
_SENTENCE_END = re.compile(r"\n|(?<=[。!?])|(?<=\.)(?=\s)")
_CLAUSE = re.compile(r"[,;]|\s+[-–—]+\s+|—+")
_REASON = re.compile(
    r"(?:因为|由于|原因是|理由是|(?i:\bbecause\b|\bsince\b|\bdue\s+to\b|\bgiven\s+that\b|\bas\s+it\b))"
)
_MARKUP = re.compile(r"\*\*|__|`|~~|\$|\\[()\[\]]")
_MACRO = re.compile(r"\\(?:boxed|text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
_LIST_MARK = re.compile(r"^(?:#{1,6}\s*|>\s*|[-*+•]\s+|\d+[.)、]\s*)+")
_PAREN_TAIL = re.compile(r"\(([^()]*)\)$")


@dataclass(frozen=True)
class Verdict:
    """A parsed label (``A``/``B``/``C``), or ``failure`` (a key of ``FAILURE_REASONS``) and no label."""

    label: str | None
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the reply gave a usable verdict."""
        return self.label is not None


def sentences(answer: str) -> list[str]:
    """The answer cut into sentences (lines, and 。!? or a full stop before a space), markup removed."""
    text = _MACRO.sub(r"\1", _MACRO.sub(r"\1", answer))  # \boxed{\text{A}} -> A
    out = []
    for piece in _SENTENCE_END.split(text):
        piece = _LIST_MARK.sub("", " ".join(_MARKUP.sub("", piece).split()))  # one space between words
        if piece:
            out.append(piece)
    return out


def letters(text: str) -> set[str]:
    """The labels a text names."""
    return set(_LETTER.findall(text))


def _form_label(clause: str) -> str | None:
    for _, pattern, group in _FORMS:
        m = pattern.match(clause)
        if m and not ("y" in m.groupdict() and m["x"] == m["y"]):  # "A优于A" compares nothing
            return m[group]
    return None


def _clause_label(clause: str) -> str | None:
    """The label a clause states by one of the named forms (after one heading such as 结论：), or None."""
    clause = " ".join(_DECORATION.sub(" ", clause).split()).rstrip(".。! ")
    if len(clause) > MAX_CLAUSE:
        return None
    headed = _HEADED.match(clause)  # "结论：回答A更好": a heading, then a form
    return _form_label(clause) or (_form_label(headed.group(1)) if headed else None)


def _read(sentence: str) -> tuple[str | None, str | None]:
    """(the label the sentence states or None, a failure code when it contradicts itself or hedges)."""
    body = sentence.rstrip(".。! ")
    if body.endswith("?"):  # a question states nothing
        return None, None
    tail = ""
    paren = _PAREN_TAIL.search(body)
    if paren and paren.start() > 0:  # "A（两者都对，但A更完整）": a reason in brackets
        body, tail = body[: paren.start()].rstrip(), paren.group(1)
    clauses = [c.strip() for c in _CLAUSE.split(body) if c.strip()]
    stated = [_clause_label(c) for c in clauses]
    if len({label for label in stated if label}) > 1:
        return None, "conflicting"
    # The deciding clause: the last one stating a label. What follows it (a reason) may not name another label.
    for i in range(len(clauses) - 1, -1, -1):
        decider, after, label = clauses[i], clauses[i + 1 :], stated[i]
        reason = _REASON.search(decider)
        if label is None and reason and reason.start() > 0:  # "Response A is better because ..."
            decider, after = decider[: reason.start()], [decider[reason.start() :], *after]
            label = _clause_label(decider)
        if label is None:
            continue
        after_text = " ".join([*after, tail])
        if letters(after_text) - {label}:
            return None, None
        whole, after_text = _as_hedged(sentence, label), _as_hedged(after_text, label)
        if (
            _CONDITIONAL.search(whole)
            or _UNSURE.search(whole)
            or _MAYBE.search(f"{decider} {after_text}")
            or _CONCESSION.search(after_text)
        ):
            return None, "hedge"
        return label, None
    return None, None


def _as_hedged(text: str, label: str) -> str:
    """``text`` as the hedge checks read it after a verdict of ``label``: for C, calling the two even is no hedge."""
    return _EVEN.sub(" ", text) if label == "C" else text


def final_label(line: str) -> str | None:
    """The label one sentence states as an answer (by the named forms), or None."""
    return _read(unicodedata.normalize("NFKC", line).strip())[0]


def parse_verdict(reply: str | None, reasoning: bool = False) -> Verdict:
    """Parse a judge reply strictly (see the module docstring); never raises.

    ``reasoning``: the reply came with reasoning beside its text (``reasoning_content``), so a reply
    with no text is ``reasoning_only`` rather than ``empty``.
    """
    text = unicodedata.normalize("NFKC", reply or "")  # full-width letters, colons and commas -> ASCII
    answer, had_reasoning = strip_reasoning(text)
    parts = sentences(answer)
    if not parts:
        return Verdict(None, "reasoning_only" if had_reasoning or reasoning else "empty")
    read = [_read(s) if letters(s) else (None, None) for s in parts]  # a statement names a label
    stated = {i: label for i, (label, _) in enumerate(read) if label}
    if len(set(stated.values())) > 1 or any(why == "conflicting" for _, why in read):
        return Verdict(None, "conflicting")
    named = [i for i, s in enumerate(parts) if letters(s)]
    chosen = next((i for i in (named[-1:] + named[:1]) if i in stated), None)
    if chosen is None:
        if any(why == "hedge" for _, why in read) or any(letters(s) and _hedged(s) for s in parts):
            return Verdict(None, "hedge")
        if len(letters(parts[-1])) > 1:
            return Verdict(None, "ambiguous")
        return Verdict(None, "unclear" if named else "no_label")
    label = stated[chosen]
    for later in parts[chosen + 1 :]:
        if _TAKE_BACK.search(later):
            return Verdict(None, "conflicting")
        hedged = _as_hedged(later, label)
        if (_UNSURE.search(hedged) or _CONCESSION.search(hedged)) and letters(later) != {label}:
            return Verdict(None, "hedge")
    return Verdict(label)


# A verdict tag as judges trained on ``cheems export judge-sft`` rows write it (on NFKC text: ［［Ａ］］ is one too).
_VERDICT_TAG = re.compile(r"\[\[([ABC])\]\]")


def final_tag(reply: str | None) -> str | None:
    """The label of the reply's last ``[[A]]``, ``[[B]]`` or ``[[C]]`` tag outside reasoning, or None.

    The rule an RL reward needs, stricter and simpler than :func:`parse_verdict`: a policy learns whatever
    a lenient reader lets through, so only the tag counts (``A更好`` or ``【A】`` is no verdict), and the
    last one decides (a reply that writes ``[[A]]`` and then ``[[B]]`` answered B, never both). Reasoning is
    removed first as for :func:`parse_verdict`, so a tag inside ``<think>…</think>`` is never the verdict.
    """
    answer, _ = strip_reasoning(unicodedata.normalize("NFKC", reply or ""))
    tags = _VERDICT_TAG.findall(answer)
    return tags[-1] if tags else None


def _hedged(sentence: str) -> bool:
    return bool(
        _CONDITIONAL.search(sentence)
        or _UNSURE.search(sentence)
        or _MAYBE.search(sentence)
        or _CONCESSION.search(sentence)
    )


def reason_text(code: str) -> str:
    """A judge's failure reason code in words (its verdict's, its reply's or its transport's)."""
    return failure_text(code, FAILURE_REASONS)
