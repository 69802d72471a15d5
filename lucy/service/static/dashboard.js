// Lucy's live dashboard: plain JS, no build step, no external resources.
// Polls the API every 2 s; the ask box streams the question's trace over SSE (fetch + ReadableStream, since
// EventSource cannot POST or send an Authorization header); the search box searches memory as one types.
// Text from video goes in with textContent / text nodes only, never as HTML.
"use strict";

const POLL_MS = 2000;
const SVG_NS = "http://www.w3.org/2000/svg";
const LEVEL_ROWS = { coarse: 0, fine: 1, ultra_fine: 2 };
const SEARCH_DELAY_MS = 250;  // typing pauses this long before a search is sent
const SEARCH_LIMIT = 24;
const EXCERPT_CHARS = 220;
const state = { selected: null, streams: [], token: sessionStorage.getItem("lucyToken") || "" };

const $ = (sel) => document.querySelector(sel);

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (state.token) h["Authorization"] = "Bearer " + state.token;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const res = await fetch(path, opts);
  if (res.status === 401) {
    $("#token-box").hidden = false;
    throw new Error("API token needed");
  }
  return res;
}

async function getJSON(path) {
  const res = await api(path);
  if (!res.ok) throw new Error(path + ": HTTP " + res.status);
  return res.json();
}

function fmtSeconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 120) return s.toFixed(1) + " s";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
  return (h ? h + ":" + String(m).padStart(2, "0") : m) + ":" + String(sec).padStart(2, "0");
}

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svgEl(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

// ------------------------------------------------------------------------------------------------ streams

function renderStreams() {
  const body = $("#streams tbody");
  body.replaceChildren();
  $("#no-streams").hidden = state.streams.length > 0;
  for (const s of state.streams) {
    const row = el("tr", { "data-stream": s.name });
    if (s.name === state.selected) row.classList.add("selected");
    row.append(el("td", { class: "name" }, s.name));
    const st = el("td");
    const badge = el("span", { class: "badge state-" + s.state, id: "state-" + s.name }, s.state);
    if (s.error) badge.title = s.error;
    st.append(badge);
    row.append(st);
    const src = el("td", { class: "src" }, s.source);
    src.title = s.source;
    row.append(src);
    row.append(el("td", { class: "num ingested" }, fmtSeconds(s.ingested_until)));
    row.append(el("td", { class: "num captioned" }, fmtSeconds(s.captioned_until)));
    row.append(el("td", { class: "num lag" }, fmtSeconds(s.lag_seconds)));
    row.append(el("td", { class: "num" }, s.decode_fps.toFixed(1)));
    row.append(el("td", { class: "num" }, s.caption.captions_per_second.toFixed(2)));
    // what was said: transcribed up to (and its lag), beside the captions; "–" for a stream without sound
    const heard = s.speech && s.speech.has_audio;
    const speech = el("td", { class: "num transcribed" },
      heard ? fmtSeconds(s.speech.transcribed_until) + " (lag " + fmtSeconds(s.speech.lag_seconds) + ")" : "–");
    if (heard) speech.title = s.speech.realtime_factor.toFixed(1) + "x real time, " + s.speech.lines + " lines";
    row.append(speech);
    row.append(el("td", { class: "num" }, String(s.reconnects)));
    row.addEventListener("click", () => select(s.name));
    body.append(row);
  }
}

function select(name) {
  state.selected = name;
  document.querySelectorAll(".stream-name").forEach((n) => { n.textContent = name; });
  $("#trace").replaceChildren();
  $("#answer").hidden = true;
  $("#evidence-frame").hidden = true;
  renderStreams();
  refreshSelected();
  runSearch();
  followAlerts();
}

// ------------------------------------------------------------------------------------------------ charts

function lineChart(svg, points, key, colour) {
  svg.replaceChildren();
  const W = 600, H = 140, pad = 18;
  if (points.length < 1) {
    const t = svgEl("text", { x: 10, y: 20, fill: "#889", "font-size": 12 });
    t.textContent = "no samples yet";
    svg.append(t);
    return;
  }
  const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1);
  const vmax = Math.max(1e-6, ...points.map((p) => p[key]));
  const x = (t) => pad + (W - 2 * pad) * (t - t0) / (t1 - t0);
  const y = (v) => H - pad - (H - 2 * pad) * v / vmax;
  svg.append(svgEl("line", { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, stroke: "#ccd" }));
  const d = points.map((p, i) => (i ? "L" : "M") + x(p.t).toFixed(1) + " " + y(p[key]).toFixed(1)).join(" ");
  svg.append(svgEl("path", { d: d, fill: "none", stroke: colour, "stroke-width": 2, class: "series",
                             "data-points": String(points.length) }));
  const label = svgEl("text", { x: W - pad, y: 14, fill: "#556", "font-size": 12, "text-anchor": "end" });
  const last = points[points.length - 1][key];
  label.textContent = "now " + last.toFixed(2) + "  (max " + vmax.toFixed(2) + ")";
  svg.append(label);
}

function timeline(svg, nodes, until) {
  svg.replaceChildren();
  const W = 600, H = 90, rowH = 24, pad = 4;
  const end = Math.max(until || 0, ...nodes.map((n) => n.end), 1);
  const start = Math.max(0, Math.min(...nodes.map((n) => n.start), end));
  const x = (t) => pad + (W - 2 * pad) * (t - start) / Math.max(1e-6, end - start);
  const colours = { coarse: "#2f6fdf", fine: "#1f9d6b", ultra_fine: "#c0691f" };
  for (const [t, anchor, xpos] of [[start, "start", pad], [end, "end", W - pad]]) {
    const label = svgEl("text", { x: xpos, y: H - 4, fill: "#667", "font-size": 11, "text-anchor": anchor });
    label.textContent = fmtSeconds(t);
    svg.append(label);
  }
  for (const n of nodes) {
    const row = LEVEL_ROWS[n.level] === undefined ? 0 : LEVEL_ROWS[n.level];
    const rect = svgEl("rect", {
      x: x(n.start).toFixed(1), y: pad + row * (rowH + 4), width: Math.max(1.5, x(n.end) - x(n.start) - 1).toFixed(1),
      height: rowH, fill: colours[n.level] || "#777", opacity: n.origin === "ingest" ? 0.85 : 0.55,
      class: "node", "data-start": n.start });
    const tip = svgEl("title");
    tip.textContent = n.level + " " + fmtSeconds(n.start) + "–" + fmtSeconds(n.end) + ": " + n.text.slice(0, 200);
    rect.append(tip);
    rect.addEventListener("click", () => showFrame(n.start));
    svg.append(rect);
  }
}

function renderNodes(nodes) {
  const list = $("#nodes");
  list.replaceChildren();
  for (const n of nodes.slice().reverse().slice(0, 30)) {
    const li = el("li", { class: "node-text" });
    const when = el("span", { class: "when" }, fmtSeconds(n.start) + "–" + fmtSeconds(n.end));
    when.addEventListener("click", () => showFrame(n.start));
    li.append(when, el("span", { class: "lvl" }, n.level + (n.origin === "ingest" ? "" : " · question")),
              el("span", { class: "text" }, n.text.length > 400 ? n.text.slice(0, 400) + "…" : n.text));
    list.append(li);
  }
}

async function showFrame(t) {
  if (!state.selected) return;
  const res = await api("/v1/streams/" + encodeURIComponent(state.selected) + "/frames?width=480&t=" + t);
  if (!res.ok) return;
  const img = $("#evidence-frame");
  if (img.dataset.url) URL.revokeObjectURL(img.dataset.url);
  img.dataset.url = URL.createObjectURL(await res.blob());
  img.src = img.dataset.url;
  img.title = "frame at " + (res.headers.get("X-Lucy-Frame-Time") || t) + " s";
  img.hidden = false;
}

// ------------------------------------------------------------------------------------------------ polling

async function refreshSelected() {
  const name = state.selected;
  if (!name) return;
  const base = "/v1/streams/" + encodeURIComponent(name);
  const [history, memory] = await Promise.all([
    getJSON(base + "/history"), getJSON(base + "/memory?latest=true&limit=60")]);
  if (name !== state.selected) return;
  lineChart($("#chart-lag"), history.points, "lag_seconds", "#c0392b");
  lineChart($("#chart-rate"), history.points, "captions_per_second", "#2f6fdf");
  const s = state.streams.find((x) => x.name === name);
  timeline($("#timeline"), memory.nodes, s ? s.ingested_until : 0);
  renderNodes(memory.nodes);
}

async function poll() {
  try {
    const health = await (await fetch("/readyz")).json();
    $("#health").textContent = health.status;
    $("#health").className = "badge " + (health.status === "ready" ? "ok" : "bad");
    const data = await getJSON("/v1/streams");
    state.streams = data.streams;
    if (!state.selected && state.streams.length) {
      select(state.streams[0].name);
    } else {
      renderStreams();
      await refreshSelected();
    }
    $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    $("#health").textContent = String(err.message || err);
    $("#health").className = "badge bad";
  }
}

// ------------------------------------------------------------------------------------------------ asking

function traceLine(step) {
  let where = "";
  if (step.start !== null && step.end !== null && step.start !== undefined) {
    where = " " + (step.level || "") + " " + fmtSeconds(step.start) + "–" + fmtSeconds(step.end);
  }
  let text = "#" + step.index + " " + step.agent + where;
  if (step.detail) text += " | " + step.detail;
  if (step.instruction) text += " | look for: " + step.instruction;
  if (step.error) text += " | ERROR: " + step.error;
  return text;
}

function showAnswer(answer) {
  const box = $("#answer");
  box.replaceChildren();
  box.className = answer.confident ? "" : "unsure";
  box.append(el("strong", { class: "text" }, answer.answer || "(no answer)"));
  box.append(el("div", { class: "muted" }, (answer.confident ? "confident" : "not confident") + " · " +
    answer.iterations + " rounds · " + answer.llm_calls + " LLM calls · " + answer.caption_calls + " captions"));
  const ev = el("div");
  for (const span of answer.evidence || []) {
    const a = el("span", { class: "evidence" }, fmtSeconds(span.start) + "–" + fmtSeconds(span.end));
    a.addEventListener("click", () => showFrame(span.start));
    ev.append(a);
  }
  box.append(ev);
  box.hidden = false;
  if (answer.evidence && answer.evidence.length) showFrame(answer.evidence[0].start);
}

function handleEvent(kind, data) {
  if (kind === "step") {
    const li = el("li", { class: "step" + (data.error ? " error" : "") }, traceLine(data));
    $("#trace").append(li);
    li.scrollIntoView({ block: "nearest" });
  } else if (kind === "answer") {
    showAnswer(data);
  } else if (kind === "error") {
    $("#trace").append(el("li", { class: "error" }, "error: " + data.detail));
  }
}

// The events of a server-sent-events response, as [kind, parsed data] (fetch, not EventSource: it sends the
// token); keep-alive comments and events without data are skipped.
async function* serverEvents(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) yield [kind, JSON.parse(data)];
    }
  }
}

async function ask(question) {
  $("#trace").replaceChildren();
  $("#answer").hidden = true;
  const button = $("#ask-button");
  button.disabled = true;
  try {
    const res = await api("/v1/streams/" + encodeURIComponent(state.selected) + "/questions", {
      method: "POST", body: JSON.stringify({ question: question }),
      headers: { "Content-Type": "application/json", "Accept": "text/event-stream" } });
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      const detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail || body);
      handleEvent("error", { detail: detail });
      return;
    }
    for await (const [kind, data] of serverEvents(res)) handleEvent(kind, data);
  } catch (err) {
    handleEvent("error", { detail: String(err.message || err) });
  } finally {
    button.disabled = false;
  }
}

// ------------------------------------------------------------------------------------------------ searching

const search = { timer: null, controller: null, seq: 0, blobs: [], observer: null };

function errorMessage(body, status) {
  if (body && body.error && body.error.message) return body.error.message;
  if (body && typeof body.detail === "string") return body.detail;
  return "HTTP " + status;
}

function queryWords(q) {
  const words = q.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w.length >= 2);
  return [...new Set(words)].sort((a, b) => b.length - a.length);  // the longest first: it wins a tie
}

// ``text`` as text nodes, with the query's words wrapped in <mark>: never parsed as HTML.
function highlighted(text, words) {
  const out = document.createDocumentFragment();
  if (!words.length) { out.append(text); return out; }
  const re = new RegExp(words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "giu");
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) out.append(text.slice(last, m.index));
    out.append(el("mark", {}, m[0]));
    last = m.index + m[0].length;
  }
  out.append(text.slice(last));
  return out;
}

// About EXCERPT_CHARS of ``text`` from the line (or, in a long line, the word) where a query word first shows.
function excerpt(text, words) {
  if (text.length <= EXCERPT_CHARS) return text;
  const lower = text.toLowerCase();
  const found = words.map((w) => lower.indexOf(w)).filter((i) => i >= 0);
  const at = found.length ? Math.min(...found) : 0;
  let from = text.lastIndexOf("\n", at) + 1;
  if (at - from > EXCERPT_CHARS / 2) from = text.indexOf(" ", at - Math.floor(EXCERPT_CHARS / 3)) + 1;
  let to = Math.min(text.length, from + EXCERPT_CHARS);
  if (to < text.length && text.lastIndexOf(" ", to) > from + EXCERPT_CHARS / 2) to = text.lastIndexOf(" ", to);
  return (from ? "… " : "") + text.slice(from, to) + (to < text.length ? " …" : "");
}

function thumbPlaceholder(text) {
  return el("div", { class: "thumb none" }, text);
}

// Thumbnails load when they scroll into view, with the token (an <img src> could not send it).
async function loadThumb(img) {
  try {
    const res = await api(img.dataset.src);
    if (!res.ok) throw new Error("HTTP " + res.status);
    const url = URL.createObjectURL(await res.blob());
    search.blobs.push(url);
    img.src = url;
  } catch (err) {
    img.replaceWith(thumbPlaceholder("frame unavailable"));
  }
}

function clearResults() {
  if (search.observer) search.observer.disconnect();
  for (const url of search.blobs) URL.revokeObjectURL(url);
  search.blobs = [];
  $("#search-results").replaceChildren();
  $("#search-mode").textContent = "";
}

function searchStatus(text, isError) {
  const box = $("#search-status");
  box.textContent = text || "";
  box.className = isError ? "error" : "muted";
  box.hidden = !text;
}

function hitCard(hit, words) {
  const card = el("li", { class: "hit", tabindex: "0", "aria-expanded": "false" });
  if (hit.frame_url) {
    const img = el("img", { class: "thumb", alt: "frame at " + fmtSeconds((hit.start + hit.end) / 2),
                            "data-src": hit.frame_url + "&width=480" });
    search.observer.observe(img);
    card.append(img);
  } else {
    card.append(thumbPlaceholder("no frame (sound only, or expired)"));
  }
  const how = ["score " + hit.score.toFixed(4)];
  if (hit.lexical_rank !== null) how.push("words #" + hit.lexical_rank);
  if (hit.semantic_rank !== null) how.push("meaning #" + hit.semantic_rank);
  if (hit.similarity !== null) how.push("similarity " + hit.similarity.toFixed(2));
  const meta = el("div", { class: "meta" });
  meta.append(el("span", { class: "when" }, fmtSeconds(hit.start) + "–" + fmtSeconds(hit.end)),
              el("span", { class: "badge level lvl-" + hit.level }, hit.level),
              el("span", { class: "score", title: how.join(", ") },
                 [hit.lexical_rank !== null ? "words" : "", hit.semantic_rank !== null ? "meaning" : ""]
                   .filter(Boolean).join(" + ")));
  if (hit.origin !== "ingest") meta.append(el("span", { class: "muted" }, "question"));
  const caption = el("p", { class: "caption" });
  caption.append(highlighted(excerpt(hit.text, words), words));
  const body = el("div", { class: "body" });
  body.append(meta, caption);
  card.append(body);
  const toggle = () => {
    const open = card.classList.toggle("expanded");
    card.setAttribute("aria-expanded", String(open));
    caption.replaceChildren(highlighted(open ? hit.text : excerpt(hit.text, words), words));
  };
  card.addEventListener("click", toggle);
  card.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(); }
  });
  return card;
}

function renderHits(result, q) {
  clearResults();
  const words = queryWords(q);
  search.observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      search.observer.unobserve(entry.target);
      loadThumb(entry.target);
    }
  }, { rootMargin: "200px" });
  const n = result.hits.length;
  $("#search-mode").textContent = n + (n === 1 ? " moment" : " moments") +
    (result.semantic ? " · by words + meaning" : " · by words only");
  const list = $("#search-results");
  for (const hit of result.hits) list.append(hitCard(hit, words));
  searchStatus(result.hits.length ? "" : "No memory of " + result.stream + " matches “" + q +
    "”. Try other words, or look at the memory timeline.");
}

async function runSearch() {
  clearTimeout(search.timer);
  if (search.controller) search.controller.abort();
  const q = $("#search-input").value.trim();
  const name = state.selected;
  const seq = ++search.seq;
  if (!q || !name) {
    clearResults();
    searchStatus(name ? "" : "Select a stream to search its memory.");
    return;
  }
  search.controller = new AbortController();
  const params = new URLSearchParams({ q: q, limit: String(SEARCH_LIMIT) });
  if ($("#search-level").value) params.set("level", $("#search-level").value);
  searchStatus("searching…");
  try {
    const res = await api("/v1/streams/" + encodeURIComponent(name) + "/search?" + params,
                          { signal: search.controller.signal });
    const body = await res.json().catch(() => ({}));
    if (seq !== search.seq) return;
    if (!res.ok) throw new Error(errorMessage(body, res.status));
    renderHits(body, q);
  } catch (err) {
    if (err.name === "AbortError" || seq !== search.seq) return;
    clearResults();
    searchStatus("Search failed: " + (err.message || err), true);
  }
}

// ------------------------------------------------------------------------------------------------ wiring

$("#search-input").addEventListener("input", () => {
  clearTimeout(search.timer);
  search.timer = setTimeout(runSearch, SEARCH_DELAY_MS);
});
$("#search-level").addEventListener("change", runSearch);
$("#search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  runSearch();
});

$("#ask-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const q = $("#ask-input").value.trim();
  if (q && state.selected) ask(q);
});

$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("#token-input").value.trim();
  sessionStorage.setItem("lucyToken", state.token);
  $("#token-box").hidden = true;
  poll();
});

$("#add-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { name: $("#add-name").value.trim(), source: $("#add-source").value.trim() };
  if ($("#add-captioner").value) body.captioner = $("#add-captioner").value;
  const res = await api("/v1/streams", { method: "POST", body: JSON.stringify(body),
                                          headers: { "Content-Type": "application/json" } });
  const out = await res.json().catch(() => ({}));
  $("#add-result").textContent = res.ok ? "started " + out.name
    : "refused: " + (typeof out.detail === "string" ? out.detail : JSON.stringify(out.detail));
  if (res.ok) { select(out.name); poll(); }
});

// ------------------------------------------------------------------------------------------------ watches
// Watches of the selected stream, its alert history, and new alerts from the alerts SSE stream (fetch, for the
// token). Questions and reasons are untrusted text: textContent only.

const watches = { controller: null };

function streamPath(rest) {
  return "/v1/streams/" + encodeURIComponent(state.selected) + rest;
}

async function refreshWatches() {
  const body = await getJSON(streamPath("/watches"));
  const items = body.watches.map((w) => {
    const li = el("li", {}, w.question + " (cooldown " + fmtSeconds(w.cooldown_seconds) + ") ");
    const del = el("button", { type: "button" }, "delete");
    del.addEventListener("click", async () => {
      await api(streamPath("/watches/" + w.id), { method: "DELETE" });
      refreshWatches();
    });
    li.append(del);
    return li;
  });
  $("#watch-list").replaceChildren(...items);
}

function alertItem(a) {
  const img = el("img", { class: "thumb", alt: "alert frame" });
  api(a.frame_url).then((res) => (res.ok ? res.blob() : Promise.reject(new Error("HTTP " + res.status))))
    .then((blob) => { img.src = URL.createObjectURL(blob); })  // kept while the alert is listed
    .catch(() => img.replaceWith(thumbPlaceholder("frame unavailable")));
  const text = el("div", {}, fmtSeconds(a.start) + "–" + fmtSeconds(a.end) + " · " + a.question + " — " + a.reason);
  const li = el("li", { class: "alert" });
  li.append(img, text);
  return li;
}

async function followAlerts() {
  if (watches.controller) watches.controller.abort();
  const controller = new AbortController();
  watches.controller = controller;
  try {
    await refreshWatches();
    const history = await getJSON(streamPath("/alerts?limit=50"));
    $("#alert-list").replaceChildren(...history.alerts.reverse().map(alertItem));
    const res = await api(streamPath("/alerts/events"), { signal: controller.signal });
    for await (const [kind, data] of serverEvents(res)) {
      if (kind === "alert") $("#alert-list").prepend(alertItem(data));
    }
  } catch (err) {
    if (controller.signal.aborted) return;
    $("#watch-result").textContent = String(err.message || err);
  }
}

$("#watch-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!state.selected) return;
  const body = { question: $("#watch-question").value };
  const cooldown = $("#watch-cooldown").value;
  if (cooldown !== "") body.cooldown_seconds = Number(cooldown);
  const res = await api(streamPath("/watches"), { method: "POST", body: JSON.stringify(body),
                                                  headers: { "Content-Type": "application/json" } });
  const out = await res.json().catch(() => ({}));
  $("#watch-result").textContent = res.ok ? "watching"
    : "refused: " + (typeof out.detail === "string" ? out.detail : JSON.stringify(out.detail));
  if (res.ok) { $("#watch-question").value = ""; refreshWatches(); }
});

poll();
setInterval(poll, POLL_MS);
