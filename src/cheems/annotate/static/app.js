// The annotation page (annotate.html): scores, equal-score comparisons, the integrated ranking with its
// live consistency check, span marking, flags and keyboard shortcuts. It builds the Answer JSON
// (cheems.annotate.answer.Answer) into the form's hidden "answer" field; the server checks it again.
// Text from responses only ever reaches the page through textContent, never innerHTML.
"use strict";

(function () {
  const dataNode = document.getElementById("task-data");
  if (!dataNode) return;
  const data = JSON.parse(dataNode.textContent);
  const keys = data.keys;
  const form = document.getElementById("answer-form");
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  const state = {
    scores: {}, // key -> 0..5
    compared: {}, // "A|C" -> "g" | "b" | "s" (g: the first is better)
    spans: [], // {key, start, end, label, text}; offsets in code points of the raw text, as Python counts
    flags: {}, // key -> ["garbled", "unusable"]
    picked: 0,
    currentPair: null,
    rankingEdited: false,
    pending: null, // a selection waiting for its label
  };

  // ---- the ranking grammar, as answer.parse_ranking reads it ----
  function normaliseRanking(text) {
    // A Chinese input method types full-width ＞ ＝ and Ａ; the grammar wants ASCII capitals.
    return text
      .replace(/[\uFF01-\uFF5E]/g, (c) => String.fromCharCode(c.charCodeAt(0) - 0xfee0))
      .toUpperCase();
  }

  function parseRanking(text) {
    if (!text.trim()) return { error: "请填写排序，例如 " + keys.join(">") };
    const levels = text.split(">").map((level) => level.split("=").map((k) => k.trim()));
    const named = levels.flat();
    for (const k of named) {
      if (!keys.includes(k)) {
        return { error: `排序中的“${k}”不是本任务的回答，请只用 ${keys.join("、")}，以 > 和 = 连接` };
      }
    }
    for (const k of keys) {
      const n = named.filter((x) => x === k).length;
      if (n !== 1) return { error: `排序${n === 0 ? "缺少" : "重复了"} ${k}：每个回答恰好出现一次` };
    }
    return { levels };
  }

  function contradictions(levels) {
    const levelOf = {};
    levels.forEach((level, i) => level.forEach((k) => (levelOf[k] = i)));
    const found = [];
    for (const x of keys) {
      for (const y of keys) {
        if (state.scores[x] > state.scores[y] && levelOf[x] > levelOf[y]) found.push([x, y]);
      }
    }
    return found;
  }

  // ---- the integrated ranking from scores and equal-score comparisons ----
  function buckets() {
    const byScore = {};
    for (const k of keys) {
      if (state.scores[k] === undefined) continue;
      (byScore[state.scores[k]] = byScore[state.scores[k]] || []).push(k);
    }
    return Object.keys(byScore)
      .map(Number)
      .sort((a, b) => b - a)
      .map((s) => byScore[s]);
  }

  function pairsToCompare() {
    const pairs = [];
    for (const bucket of buckets()) {
      for (let i = 0; i < bucket.length; i++) {
        for (let j = i + 1; j < bucket.length; j++) pairs.push(bucket[i] + "|" + bucket[j]);
      }
    }
    return pairs;
  }

  // Levels of one equal-score bucket as Algorithm 1 (cheems.ranking) makes them: responses that beat each
  // other round a cycle share a level, then levels follow the order of the comparisons.
  function bucketLevels(bucket) {
    const reach = {};
    for (const a of bucket) {
      reach[a] = {};
      for (const b of bucket) reach[a][b] = a === b;
    }
    for (const [pair, verdict] of Object.entries(state.compared)) {
      const [a, b] = pair.split("|");
      if (!(a in reach) || !(b in reach)) continue;
      if (verdict !== "b") reach[a][b] = true;
      if (verdict !== "g") reach[b][a] = true;
    }
    for (const k of bucket) for (const a of bucket) for (const b of bucket) if (reach[a][k] && reach[k][b]) reach[a][b] = true;
    const levels = [];
    let left = bucket.slice();
    let cycle = false;
    while (left.length) {
      // the top of what is left: nothing outside its own cycle beats it
      const top = left.filter((a) => left.every((b) => !reach[b][a] || reach[a][b]));
      // a strict verdict inside one level means the comparisons went round a cycle and were merged
      if (top.some((a) => top.some((b) => ["g", "b"].includes(state.compared[a + "|" + b])))) cycle = true;
      levels.push(top);
      left = left.filter((a) => !top.includes(a));
    }
    return { levels, cycle };
  }

  function autoRanking() {
    if (keys.some((k) => state.scores[k] === undefined)) return { text: "", cycle: false };
    const levels = [];
    let cycle = false;
    for (const bucket of buckets()) {
      const made = bucketLevels(bucket);
      levels.push(...made.levels);
      cycle = cycle || made.cycle;
    }
    return { text: levels.map((l) => l.join("=")).join(">"), cycle };
  }

  // ---- what the server receives ----
  function answer(levelsOk, contradicted) {
    const flags = {};
    for (const k of keys) if (state.flags[k] && state.flags[k].length) flags[k] = state.flags[k].slice();
    return {
      scores: Object.assign({}, state.scores),
      ranking: $("#ranking").value.trim(),
      spans: state.spans.map((s) => ({ key: s.key, start: s.start, end: s.end, label: s.label, text: s.text })),
      flags,
      note: $("#note").value,
      override: Boolean(levelsOk && contradicted && $("#override").checked),
    };
  }

  function update() {
    // scores
    for (const button of $$(".score-button")) {
      const on = state.scores[button.dataset.key] === Number(button.dataset.score);
      button.classList.toggle("on", on);
      button.setAttribute("aria-pressed", String(on));
    }
    $$(".response").forEach((card, i) => card.classList.toggle("picked", i === state.picked));
    // comparisons
    const pairs = pairsToCompare();
    for (const pair of Object.keys(state.compared)) if (!pairs.includes(pair)) delete state.compared[pair];
    if (!pairs.includes(state.currentPair)) state.currentPair = pairs.find((p) => !(p in state.compared)) || pairs[0] || null;
    drawComparisons(pairs);
    // ranking
    const auto = autoRanking();
    const field = $("#ranking");
    if (!state.rankingEdited) field.value = auto.text;
    $("#ranking-reset").hidden = !state.rankingEdited;
    $("#cycle-note").hidden = state.rankingEdited || !auto.cycle;
    // checks
    const missing = [];
    const unscored = keys.filter((k) => state.scores[k] === undefined);
    if (unscored.length) missing.push("给 " + unscored.join("、") + " 打分");
    const open = pairs.filter((p) => !(p in state.compared));
    if (!state.rankingEdited && open.length) missing.push("比较同分的 " + open.map((p) => p.replace("|", " 与 ")).join("、"));
    const parsed = unscored.length ? { error: null } : parseRanking(field.value);
    const rankingError = parsed.error || "";
    $("#ranking-error").textContent = rankingError;
    $("#ranking-error").hidden = !rankingError;
    if (rankingError) missing.push("改正排序");
    const found = parsed.levels ? contradictions(parsed.levels) : [];
    const warning = $("#contradiction");
    warning.hidden = found.length === 0;
    $("#contradiction-text").textContent = found
      .map(([x, y]) => `${x}（${state.scores[x]} 分）排在 ${y}（${state.scores[y]} 分）之后`)
      .join("；");
    if (found.length && !$("#override").checked) missing.push("改正排序，或勾选“确认此排序”");
    if (!found.length) $("#override").checked = false;
    $("#answer").value = JSON.stringify(answer(Boolean(parsed.levels), found.length > 0));
    $("#submit").disabled = missing.length > 0;
    $("#missing").textContent = missing.length ? "还需：" + missing.join("；") : "可以提交";
    drawSpans();
  }

  function drawComparisons(pairs) {
    const box = $("#comparisons");
    box.replaceChildren();
    $("#comparisons-empty").hidden = pairs.length > 0;
    for (const pair of pairs) {
      const [a, b] = pair.split("|");
      const row = document.createElement("div");
      row.className = "pair" + (pair === state.currentPair ? " current" : "");
      row.dataset.pair = pair;
      const label = document.createElement("span");
      label.className = "pair-label";
      label.textContent = `${a} 对比 ${b}（同为 ${state.scores[a]} 分）`;
      row.append(label);
      for (const [verdict, text] of [["g", `g：${a} 更好`], ["s", "s：一样好"], ["b", `b：${b} 更好`]]) {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "compare-button" + (state.compared[pair] === verdict ? " on" : "");
        button.dataset.pair = pair;
        button.dataset.verdict = verdict;
        button.setAttribute("aria-pressed", String(state.compared[pair] === verdict));
        button.textContent = text;
        row.append(button);
      }
      box.append(row);
    }
  }

  // ---- spans: offsets into the raw text, in code points (Python's len) ----
  function codePoints(text, units) {
    return Array.from(text.slice(0, units)).length;
  }

  function units(text, points) {
    return Array.from(text).slice(0, points).join("").length;
  }

  let drawnSpans = null;

  function drawSpans() {
    // Redrawn only when the spans change: redrawing the raw view would drop a selection being made in it.
    const signature = JSON.stringify(state.spans);
    if (signature === drawnSpans) return;
    drawnSpans = signature;
    for (const key of keys) {
      const list = $(`.span-list[data-key="${key}"]`);
      list.replaceChildren();
      state.spans.forEach((span, i) => {
        if (span.key !== key) return;
        const item = document.createElement("li");
        const tag = document.createElement("span");
        tag.className = "span-tag label-" + span.label;
        tag.textContent = data.span_labels[span.label];
        const quote = document.createElement("q");
        quote.textContent = span.text.length > 60 ? span.text.slice(0, 60) + "…" : span.text;
        const where = document.createElement("span");
        where.className = "muted";
        where.textContent = ` 第 ${span.start + 1}–${span.end} 字 `;
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "link-button span-remove";
        remove.dataset.index = String(i);
        remove.textContent = "删除";
        item.append(tag, quote, where, remove);
        list.append(item);
      });
      drawRaw(key);
    }
    highlightRendered();
  }

  // The rendered view marks spans too, where the browser has the CSS Custom Highlight API: ranges over
  // the existing text, so the rendered HTML is never rebuilt. A span is found by its text, as it was chosen.
  function highlightRendered() {
    if (!(window.CSS && CSS.highlights && window.Highlight)) return;
    const byLabel = {};
    for (const span of state.spans) {
      const root = $(`.response-body[data-key="${span.key}"]`);
      const range = rangeOfText(root, span.text);
      if (range) (byLabel[span.label] = byLabel[span.label] || []).push(range);
    }
    for (const label of Object.keys(data.span_labels)) {
      CSS.highlights.set("span-" + label, new Highlight(...(byLabel[label] || [])));
    }
  }

  function rangeOfText(root, text) {
    const nodes = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
    const whole = nodes.map((n) => n.data).join("");
    const at = whole.indexOf(text);
    if (at === -1 || !text) return null;
    const range = document.createRange();
    let seen = 0;
    for (const node of nodes) {
      const end = seen + node.data.length;
      if (seen <= at && at < end) range.setStart(node, at - seen);
      if (seen < at + text.length && at + text.length <= end) range.setEnd(node, at + text.length - seen);
      seen = end;
    }
    return range;
  }

  // The raw view: the response's exact text, marked spans highlighted.
  function drawRaw(key) {
    const pre = $(`.response-raw[data-key="${key}"]`);
    const text = data.texts[key];
    const marks = state.spans.filter((s) => s.key === key);
    const cuts = new Set([0, text.length]);
    for (const s of marks) {
      cuts.add(units(text, s.start));
      cuts.add(units(text, s.end));
    }
    const points = Array.from(cuts).sort((a, b) => a - b);
    pre.replaceChildren();
    for (let i = 0; i + 1 < points.length; i++) {
      const [from, to] = [points[i], points[i + 1]];
      const piece = text.slice(from, to);
      const over = marks.filter((s) => units(text, s.start) <= from && units(text, s.end) >= to);
      if (!over.length) {
        pre.append(document.createTextNode(piece));
        continue;
      }
      const mark = document.createElement("mark");
      mark.className = "label-" + over[0].label;
      mark.title = over.map((s) => data.span_labels[s.label]).join("、");
      mark.textContent = piece;
      pre.append(mark);
    }
  }

  function offsetIn(root, node, offset) {
    const range = document.createRange();
    range.setStart(root, 0);
    range.setEnd(node, offset);
    return range.toString().length;
  }

  // A selection in the raw view maps exactly; one in the rendered view is found in the raw text
  // (the occurrence nearest to where it sits in the rendered text).
  function selectionSpan() {
    const sel = window.getSelection();
    if (!sel || sel.isCollapsed || !sel.rangeCount) return null;
    const range = sel.getRangeAt(0);
    const container = (n) => (n.nodeType === 1 ? n : n.parentElement).closest(".response-raw, .response-body");
    const root = container(range.startContainer);
    if (!root || root !== container(range.endContainer)) return { error: "请在同一个回答内选择文字" };
    const key = root.dataset.key;
    const text = data.texts[key];
    let start;
    let end;
    if (root.classList.contains("response-raw")) {
      start = offsetIn(root, range.startContainer, range.startOffset);
      end = offsetIn(root, range.endContainer, range.endOffset);
    } else {
      const picked = sel.toString();
      const shown = root.textContent.length || 1;
      const guess = (offsetIn(root, range.startContainer, range.startOffset) / shown) * text.length;
      let best = -1;
      for (let at = text.indexOf(picked); at !== -1; at = text.indexOf(picked, at + 1)) {
        if (best === -1 || Math.abs(at - guess) < Math.abs(best - guess)) best = at;
      }
      if (!picked.trim() || best === -1) return { error: "无法在原文中定位所选文字，请点“原文”切换视图后再选" };
      start = best;
      end = best + picked.length;
    }
    if (end <= start) return null;
    return {
      key,
      start: codePoints(text, start),
      end: codePoints(text, end),
      text: text.slice(start, end),
    };
  }

  function showSpanMenu(event) {
    const menu = $("#span-menu");
    const found = selectionSpan();
    if (!found) {
      menu.hidden = true;
      return;
    }
    state.pending = found.error ? null : found;
    $("#span-menu-error").textContent = found.error || "";
    $("#span-menu-error").hidden = !found.error;
    $$(".span-label-button", menu).forEach((b) => (b.hidden = Boolean(found.error)));
    $("#span-menu-title").textContent = found.error ? "" : `标记 ${found.key} 中的“${found.text.slice(0, 20)}${found.text.length > 20 ? "…" : ""}”：`;
    menu.hidden = false;
    menu.style.left = Math.min(event.pageX, window.scrollX + document.documentElement.clientWidth - 320) + "px";
    menu.style.top = event.pageY + 12 + "px";
  }

  // ---- events ----
  function pick(i) {
    state.picked = Math.max(0, Math.min(keys.length - 1, i));
    $$(".response")[state.picked].scrollIntoView({ block: "nearest" });
    update();
  }

  function score(key, value) {
    state.scores[key] = value;
    const next = keys.findIndex((k, i) => i > keys.indexOf(key) && state.scores[k] === undefined);
    if (next !== -1) state.picked = next;
    update();
  }

  function compare(pair, verdict) {
    state.compared[pair] = verdict;
    const pairs = pairsToCompare();
    state.currentPair = pairs.find((p) => !(p in state.compared)) || pair;
    update();
  }

  document.addEventListener("click", (event) => {
    const t = event.target;
    if (t.closest(".score-button")) {
      const b = t.closest(".score-button");
      state.picked = keys.indexOf(b.dataset.key);
      score(b.dataset.key, Number(b.dataset.score));
    } else if (t.closest(".compare-button")) {
      const b = t.closest(".compare-button");
      compare(b.dataset.pair, b.dataset.verdict);
    } else if (t.closest(".pair")) {
      state.currentPair = t.closest(".pair").dataset.pair;
      update();
    } else if (t.closest(".span-label-button")) {
      if (state.pending) state.spans.push(Object.assign({ label: t.closest(".span-label-button").dataset.label }, state.pending));
      state.pending = null;
      $("#span-menu").hidden = true;
      window.getSelection().removeAllRanges();
      update();
    } else if (t.closest(".span-remove")) {
      state.spans.splice(Number(t.closest(".span-remove").dataset.index), 1);
      update();
    } else if (t.closest(".view-toggle")) {
      const card = t.closest(".response");
      const raw = $(".response-raw", card);
      raw.hidden = !raw.hidden;
      $(".response-body", card).hidden = !raw.hidden;
      t.closest(".view-toggle").textContent = raw.hidden ? "原文" : "渲染";
    } else if (t.closest(".response") && !t.closest("a, button, input, label, textarea")) {
      state.picked = $$(".response").indexOf(t.closest(".response"));
      update();
    }
    if (!t.closest("#span-menu") && !t.closest(".response-raw, .response-body")) $("#span-menu").hidden = true;
  });

  document.addEventListener("mouseup", (event) => {
    if (event.target.closest(".response-raw, .response-body")) window.setTimeout(() => showSpanMenu(event), 0);
  });

  document.addEventListener("change", (event) => {
    const box = event.target.closest(".flag-box");
    if (box) {
      state.flags[box.dataset.key] = $$(`.flag-box[data-key="${box.dataset.key}"]`)
        .filter((b) => b.checked)
        .map((b) => b.value);
    }
    update();
  });

  $("#ranking").addEventListener("input", () => {
    const field = $("#ranking");
    const at = field.selectionStart;
    field.value = normaliseRanking(field.value);
    field.setSelectionRange(at, at);
    state.rankingEdited = true;
    update();
  });
  $("#ranking-reset").addEventListener("click", () => {
    state.rankingEdited = false;
    update();
  });
  $("#note").addEventListener("input", update);

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    if (event.target.closest("input, textarea, select")) return;
    const digit = /^Digit([0-9])$/.exec(event.code);
    if (digit && event.shiftKey) {
      const i = Number(digit[1]) - 1;
      if (i >= 0 && i < keys.length) pick(i);
    } else if (digit && Number(digit[1]) <= 5) {
      score(keys[state.picked], Number(digit[1]));
    } else if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
      pick(state.picked + (event.key === "ArrowLeft" ? -1 : 1));
    } else if ("gbs".includes(event.key) && event.key.length === 1 && state.currentPair) {
      compare(state.currentPair, event.key);
    } else if (event.key === "Escape") {
      $("#span-menu").hidden = true;
    } else {
      return;
    }
    event.preventDefault();
  });

  form.addEventListener("submit", (event) => {
    update();
    if ($("#submit").disabled) event.preventDefault();
  });

  // After a refused submit the server sends the answer back: start from it.
  if (data.draft) {
    const d = data.draft;
    Object.assign(state.scores, d.scores || {});
    state.spans = (d.spans || []).filter((s) => keys.includes(s.key));
    for (const [k, v] of Object.entries(d.flags || {})) {
      state.flags[k] = v;
      for (const box of $$(`.flag-box[data-key="${k}"]`)) box.checked = v.includes(box.value);
    }
    $("#note").value = d.note || "";
    $("#ranking").value = d.ranking || "";
    state.rankingEdited = Boolean(d.ranking);
    $("#override").checked = Boolean(d.override);
  }
  update();
  // The script runs after the page is parsed (defer): until this mark, the form shows nothing of the
  // draft and its buttons do nothing. Tests and tools wait for it rather than for the page's markup.
  form.dataset.ready = "true";
})();
