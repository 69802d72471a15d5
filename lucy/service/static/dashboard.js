// Lucy's live dashboard: plain JS, no build step, no external resources.
// Updates are pushed: one server-sent-events stream (/v1/dashboard/events) brings every stream's changed figures,
// chart points, host CPU and memory, new memory nodes and alerts; nothing polls, and the page holds one connection.
// Server-sent events are read with fetch and a ReadableStream, since EventSource cannot send an Authorization header
// (nor POST, for the ask box).
// Text from video goes in with textContent / text nodes only, never as HTML.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const LEVEL_ROWS = { coarse: 0, fine: 1, ultra_fine: 2 };
const SEARCH_DELAY_MS = 250;  // typing pauses this long before a search is sent
const SEARCH_LIMIT = 24;
const EXCERPT_CHARS = 220;
const THUMB_MS = 3000;        // a stream's live thumbnail is fetched again at most this often (when it has new frames)
const THUMB_WIDTH = 160;
const NODES_SHOWN = 60;
const HISTORY_POINTS = 900;
const ACTIVE = new Set(["starting", "recording", "catching_up", "reconnecting"]);  // the states a stop button stops
const state = {
  selected: null, streams: new Map(), rows: new Map(), token: sessionStorage.getItem("lucyToken") || "",
  points: [], nodes: [], host: [], hostNow: null, answered: null, ticks: 0,
};

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

// Wall-clock times (chart axes, when a question was asked): 24-hour h:mm:ss, local time.
function fmtClock(unix) {
  const d = new Date(unix * 1000);
  return d.getHours() + ":" + String(d.getMinutes()).padStart(2, "0") + ":" + String(d.getSeconds()).padStart(2, "0");
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function streamPath(rest, name) {
  return "/v1/streams/" + encodeURIComponent(name || state.selected) + rest;
}

// ------------------------------------------------------------------------------------------------ streams

const CELLS = ["thumb", "name", "state", "opt src", "num ingested", "num captioned", "num lag", "num opt fps",
               "num opt rate", "num opt transcribed", "num opt reconnects", "num opt worker", "actions"];

function streamRow(name) {
  let row = state.rows.get(name);
  if (row) return row;
  row = el("tr", { "data-stream": name });
  const cells = {};
  for (const cls of CELLS) {
    const td = el("td", { class: cls });
    cells[cls.split(" ").pop()] = td;
    row.append(td);
  }
  const img = el("img", { class: "live", alt: "latest frame of " + name, width: "96", height: "54" });
  cells.thumb.append(img);
  cells.name.textContent = name;
  const stop = el("button", { type: "button", class: "stop", title: "stop ingesting; memory and frames are kept" },
                  "stop");
  const del = el("button", { type: "button", class: "delete danger",
                             title: "stop, and delete the stream's frames and memory" }, "delete");
  stop.addEventListener("click", (event) => { event.stopPropagation(); stopStream(name, stop); });
  del.addEventListener("click", (event) => { event.stopPropagation(); deleteStream(name, del); });
  cells.actions.append(stop, del);
  row.addEventListener("click", () => select(name));
  row._cells = cells;
  row._thumb = { img: img, frames: -1, at: 0, url: null, shown: null, busy: false };
  state.rows.set(name, row);
  return row;
}

function renderStreams() {
  const body = $("#streams tbody");
  const names = [...state.streams.keys()].sort();
  $("#no-streams").hidden = names.length > 0;
  names.forEach((name, i) => {
    const s = state.streams.get(name);
    const row = streamRow(name);
    if (body.children[i] !== row) body.insertBefore(row, body.children[i] || null);
    row.classList.toggle("selected", name === state.selected);
    const c = row._cells;
    let badge = c.state.firstChild;
    if (!badge) { badge = el("span", { id: "state-" + name }); c.state.append(badge); }
    badge.className = "badge state-" + s.state;
    badge.textContent = s.state;
    badge.title = s.error || s.lost || "";
    c.src.textContent = s.source;
    c.src.title = s.source;
    c.ingested.textContent = fmtTime(s.ingested_until);
    c.captioned.textContent = fmtTime(s.captioned_until);
    c.lag.textContent = fmtTime(s.lag_seconds);
    c.fps.textContent = s.decode_fps.toFixed(1);
    c.rate.textContent = s.caption.captions_per_second.toFixed(2);
    // what was said: transcribed up to (and its lag), beside the captions; "–" for a stream without sound
    const heard = s.speech && s.speech.has_audio;
    c.transcribed.textContent = heard ? fmtTime(s.speech.transcribed_until) + " (lag " +
      fmtTime(s.speech.lag_seconds) + ")" : "–";
    c.transcribed.title = heard ? s.speech.realtime_factor.toFixed(1) + "x real time, " + s.speech.lines + " lines"
      : "";
    c.reconnects.textContent = String(s.reconnects);
    const w = state.hostNow && state.hostNow.workers ? state.hostNow.workers[name] : null;
    c.worker.textContent = w ? Math.round(w.cpu_percent) + "% · " + fmtBytes(w.rss_bytes) : "–";
    row.querySelector("button.stop").hidden = !(s.managed && ACTIVE.has(s.state));
    refreshThumb(name, row, s);
  });
  for (const [name, row] of state.rows) {
    if (!state.streams.has(name)) {
      if (row._thumb.url) URL.revokeObjectURL(row._thumb.url);
      row.remove();
      state.rows.delete(name);
    }
  }
}

// A stream's live thumbnail: its newest frame, fetched again when the pushed figures say it has new frames (at most
// every THUMB_MS). The server answers 304 for the frame the browser already has (ETag); the fetch sends the token.
async function refreshThumb(name, row, s) {
  const t = row._thumb;
  const now = Date.now();
  if (t.busy || s.frames === t.frames || !s.frames || now - t.at < THUMB_MS) return;
  t.busy = true;
  t.at = now;
  const frames = s.frames;
  try {
    const res = await api(streamPath("/frames/latest?width=" + THUMB_WIDTH, name));
    if (!res.ok) return;
    t.frames = frames;
    const shown = res.headers.get("X-Lucy-Frame-Time");
    t.img.title = "frame at " + fmtTime(Number(shown));
    if (shown === t.shown) return;
    const url = URL.createObjectURL(await res.blob());
    if (t.url) URL.revokeObjectURL(t.url);
    t.url = url;
    t.shown = shown;
    t.img.src = url;
  } catch (err) {
    // next push tries again
  } finally {
    t.busy = false;
  }
}

function streamResult(text) {
  $("#stream-result").textContent = text;
}

async function stopStream(name, button) {
  button.disabled = true;
  try {
    const res = await api(streamPath("", name), { method: "DELETE" });
    const out = await res.json().catch(() => ({}));
    streamResult(res.ok ? "stopped " + name + " (its memory is kept)"
      : "not stopped: " + errorMessage(out, res.status));
    if (res.ok) mergeStatus(name, out);
  } catch (err) {
    streamResult(String(err.message || err));
  } finally {
    button.disabled = false;
  }
}

// Deleting is two clicks: the first arms the button for a few seconds.
async function deleteStream(name, button) {
  if (!button.classList.contains("armed")) {
    button.classList.add("armed");
    button.textContent = "delete all?";
    button._disarm = setTimeout(() => { button.classList.remove("armed"); button.textContent = "delete"; }, 5000);
    return;
  }
  clearTimeout(button._disarm);
  button.disabled = true;
  try {
    const res = await api(streamPath("?purge=true", name), { method: "DELETE" });
    const out = await res.json().catch(() => ({}));
    streamResult(res.ok ? "deleted " + name + " with its frames and memory"
      : "not deleted: " + errorMessage(out, res.status));
    if (res.ok) removeStreams([name]);
  } catch (err) {
    streamResult(String(err.message || err));
  } finally {
    button.disabled = false;
    button.classList.remove("armed");
    button.textContent = "delete";
  }
}

function mergeStatus(name, changes) {
  const s = state.streams.get(name);
  state.streams.set(name, s ? Object.assign(s, changes) : changes);
}

function removeStreams(names) {
  for (const name of names) state.streams.delete(name);
  if (names.includes(state.selected)) {
    const next = [...state.streams.keys()].sort()[0];
    if (next) select(next); else clearSelection();
  }
  renderStreams();
}

function clearSelection() {
  state.selected = null;
  document.querySelectorAll(".stream-name").forEach((n) => { n.textContent = "no stream selected"; });
  state.points = [];
  state.nodes = [];
  resetSpans();
  drawSelected();
  $("#question-list").replaceChildren();
  resetObjects();
  syncLive();
}

async function select(name) {
  if (!state.streams.has(name)) return;
  const changed = state.selected !== name;
  state.selected = name;
  document.querySelectorAll(".stream-name").forEach((n) => { n.textContent = name; });
  renderStreams();
  if (!changed) return;
  $("#trace").replaceChildren();
  $("#answer").hidden = true;
  $("#evidence-frame").hidden = true;
  state.points = [];
  state.nodes = [];
  resetSpans();
  charts.userFor = null;
  questions.open = new Set();
  state.answered = state.streams.get(name).questions.answered;
  runSearch();
  loadWatches();
  loadQuestions();
  resetObjects();
  loadObjects();
  syncLive();
  try {
    const [history, memory] = await Promise.all([
      getJSON(streamPath("/history")), getJSON(streamPath("/memory?latest=true&limit=" + NODES_SHOWN)), loadSpans(),
      loadSummaries()]);
    if (name !== state.selected) return;
    state.points = history.points.concat(state.points.filter((p) => p.t > (history.points.at(-1) || { t: 0 }).t));
    addNodes(memory.nodes);
    drawSelected();
  } catch (err) {
    setHealth(String(err.message || err), false);
  }
}

// ------------------------------------------------------------------------------------------------ charts

// Ticks at a round step covering [lo, hi], about ``count`` of them.
function niceTicks(lo, hi, count, steps) {
  const span = Math.max(hi - lo, 1e-9);
  const step = steps.find((s) => span / s <= count) || steps[steps.length - 1];
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(v);
  return out;
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];

function valueSteps(max) {
  const out = [];
  for (let e = -4; e <= 9; e++) for (const m of [1, 2, 5]) out.push(m * 10 ** e);
  return out.filter((s) => s * 8 >= max / 100);
}

// A line chart with a time axis (wall clock) and a value axis. ``series``: [{points: [{t, v}], colour, name}].
function chart(svg, series, opts) {
  svg.replaceChildren();
  const W = Math.max(200, Math.round(svg.clientWidth || 600)), H = Math.max(80, Math.round(svg.clientHeight || 130));
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const left = 48, right = 10, top = 16, bottom = 20;
  const all = series.flatMap((s) => s.points);
  if (!all.length) {
    svg.append(svgEl("text", { x: left, y: top + 14, class: "empty" }, "no samples yet"));
    return;
  }
  const t1 = Math.max(...all.map((p) => p.t)), t0 = Math.min(Math.min(...all.map((p) => p.t)), t1 - 60);
  const vmax = opts.max !== undefined ? opts.max
    : Math.max(1e-6, ...all.map((p) => p.v), opts.band ? opts.band.upTo * 1.15 : 0) * 1.1;
  const x = (t) => left + (W - left - right) * (t - t0) / (t1 - t0);
  const y = (v) => H - bottom - (H - top - bottom) * Math.min(v, vmax) / vmax;
  const grid = svgEl("g", { class: "axis" });
  const vTicks = opts.timeValues ? niceTicks(0, vmax, 3, TIME_STEPS) : niceTicks(0, vmax, 3, valueSteps(vmax));
  for (const v of vTicks) {
    grid.append(svgEl("line", { x1: left, x2: W - right, y1: y(v), y2: y(v), class: v ? "grid" : "base" }));
    grid.append(svgEl("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end" },
                      opts.timeValues ? fmtTime(v) : (opts.unit === "%" ? v + "%" : String(+v.toPrecision(3)))));
  }
  const tTicks = niceTicks(t0, t1, Math.max(2, Math.floor((W - left - right) / 80)), TIME_STEPS);
  for (const t of tTicks) {
    grid.append(svgEl("line", { x1: x(t), x2: x(t), y1: H - bottom, y2: H - bottom + 4, class: "base" }));
    const anchor = x(t) < left + 24 ? "start" : (x(t) > W - right - 24 ? "end" : "middle");
    grid.append(svgEl("text", { x: x(t), y: H - 5, "text-anchor": anchor, class: "tick-time" }, fmtClock(t)));
  }
  svg.append(grid);
  // Bands of what is normal (the lag chart: a span filling, then a closed span being captioned): the line is drawn
  // in its own colour inside them and in the alarm colour only above the last.
  const band = opts.band;
  if (band) {
    const fill = y(band.upTo), edge = y(band.warnAbove);
    svg.append(svgEl("rect", { x: left, y: fill, width: W - left - right, height: y(0) - fill, class: "band" }),
               svgEl("text", { x: left + 6, y: fill + 12, class: "band-label" }, band.label));
    if (fill - edge > 1) {
      svg.append(svgEl("rect", { x: left, y: edge, width: W - left - right, height: fill - edge, class: "band next" }));
      if (fill - edge > 14) svg.append(svgEl("text", { x: left + 6, y: edge + 12, class: "band-label" }, band.next));
    }
    const defs = svgEl("defs");
    for (const [id, y0, y1] of [["below", edge, H], ["above", 0, edge]]) {
      const clip = svgEl("clipPath", { id: svg.id + "-" + id });
      clip.append(svgEl("rect", { x: 0, y: y0, width: W, height: y1 - y0 }));
      defs.append(clip);
    }
    svg.append(defs);
  }
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map((p, i) => (i ? "L" : "M") + x(p.t).toFixed(1) + " " + y(p.v).toFixed(1)).join(" ");
    const line = { d: d, fill: "none", stroke: s.colour, "stroke-width": 2, class: "series",
                   "data-points": String(s.points.length), "data-name": s.name };
    if (!band) { svg.append(svgEl("path", line)); continue; }
    svg.append(svgEl("path", Object.assign({}, line, { "clip-path": "url(#" + svg.id + "-below)" })),
               svgEl("path", Object.assign({}, line, { stroke: band.over, class: "series over",
                                                       "clip-path": "url(#" + svg.id + "-above)" })));
  }
  const last = series[0].points.at(-1);
  if (last) {
    const now = opts.timeValues ? fmtTime(last.v) : (opts.unit === "%" ? last.v.toFixed(0) + "%" : last.v.toFixed(2));
    svg.append(svgEl("text", { x: W - right, y: 11, "text-anchor": "end", class: "now" }, "now " + now));
  }
}

// The lag chart's bands: media time ingested but not captioned yet grows to one coarse span before the span closes
// and is captioned, so a healthy stream draws a saw-tooth up to T_c, plus the time its caption takes, never a flat 0.
// A stream keeps up while each span is captioned before the next one closes (lag under 2 T_c); only above that is
// the line red. The bands show these figures, from the stream's preset, rather than hiding them (lag minus the open
// span's age would hide a caption's time too, and read as a spike each time a span closes).
function lagBand() {
  const T = coarseSeconds();
  return { upTo: T, warnAbove: 2 * T, over: "#c0392b", label: "a span filling (" + fmtTime(T) + ")",
           next: "the closed span being captioned" };
}

// The charts are open while the selected stream runs; a stream that has ended folds them under one line of its final
// figures (a click opens them again, and that choice holds until another stream is selected).
const charts = { auto: true, userFor: null };

function foldCharts() {
  const box = $("#caption-charts"), s = state.streams.get(state.selected);
  const active = !s || ACTIVE.has(s.state);
  if (charts.userFor !== state.selected && box.open !== active) { charts.auto = active; box.open = active; }
  if (!s) { $("#caption-summary").textContent = "charts"; return; }
  const lags = state.points.map((p) => p.lag_seconds);
  const figures = active
    ? ["lag " + fmtTime(s.lag_seconds), s.caption.captions_per_second.toFixed(2) + " captions/s"]
    : [s.state, "captioned " + fmtTime(s.captioned_until) + " of " + fmtTime(s.ingested_until),
       s.caption.coarse_nodes + " coarse captions", "final lag " + fmtTime(s.lag_seconds)];
  if (!active && lags.length) figures.push("peak lag " + fmtTime(Math.max(...lags)));
  if (s.caption.failures) figures.push(s.caption.failures + " failed captions");
  $("#caption-summary").textContent = figures.join(" · ");
  $("#lag-note").textContent = "· a coarse span closes every " + fmtTime(coarseSeconds()) +
    ": lag climbs to it, then drops as the span is captioned; red: more than one span waits";
}

$("#caption-charts").addEventListener("toggle", () => {
  const box = $("#caption-charts");
  if (box.open !== charts.auto) { charts.userFor = state.selected; charts.auto = box.open; }
  if (box.open) drawSelected();
});

function drawSelected() {
  const pts = state.points;
  foldCharts();
  chart($("#chart-lag"), [{ name: "lag", colour: "#2f6fdf",
                            points: pts.map((p) => ({ t: p.t, v: p.lag_seconds })) }],
        { timeValues: true, band: state.selected ? lagBand() : null });
  chart($("#chart-rate"), [{ name: "rate", colour: "#2f6fdf",
                             points: pts.map((p) => ({ t: p.t, v: p.captions_per_second })) }], {});
  const s = state.streams.get(state.selected);
  timeline($("#timeline"), state.nodes, s ? s.ingested_until : 0);
}

function drawHost() {
  chart($("#chart-host"), [
    { name: "cpu", colour: "#2f6fdf", points: state.host.map((p) => ({ t: p.t, v: p.cpu_percent })) },
    { name: "memory", colour: "#1f9d6b", points: state.host.map((p) => ({ t: p.t, v: p.memory_percent })) },
  ], { max: 100, unit: "%" });
}

function timeline(svg, nodes, until) {
  svg.replaceChildren();
  const W = Math.max(200, Math.round(svg.clientWidth || 600)), H = 96, rowH = 20, pad = 6, axis = 18;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const end = Math.max(until || 0, ...nodes.map((n) => n.end), 1);
  const start = Math.max(0, Math.min(...nodes.map((n) => n.start), end));
  const x = (t) => pad + (W - 2 * pad) * (t - start) / Math.max(1e-6, end - start);
  const colours = { coarse: "#2f6fdf", fine: "#1f9d6b", ultra_fine: "#c0691f", speech: "#7a4fb0" };
  const grid = svgEl("g", { class: "axis" });
  const ticks = niceTicks(start, end, Math.max(2, Math.floor(W / 90)), TIME_STEPS);
  for (const t of ticks) {
    grid.append(svgEl("line", { x1: x(t), x2: x(t), y1: pad, y2: H - axis + 3, class: "grid" }));
    const anchor = x(t) < 20 ? "start" : (x(t) > W - 20 ? "end" : "middle");
    grid.append(svgEl("text", { x: x(t), y: H - 5, "text-anchor": anchor, class: "tick-time" }, fmtTime(t)));
  }
  svg.append(grid);
  if (!nodes.length) svg.append(svgEl("text", { x: pad + 4, y: pad + 14, class: "empty" }, "no memory yet"));
  for (const n of nodes) {
    const row = LEVEL_ROWS[n.level] === undefined ? 0 : LEVEL_ROWS[n.level];
    const rect = svgEl("rect", {
      x: x(n.start).toFixed(1), y: pad + row * (rowH + 3), width: Math.max(1.5, x(n.end) - x(n.start) - 1).toFixed(1),
      height: rowH, fill: colours[n.level] || "#777", opacity: n.origin === "ingest" ? 0.85 : 0.55,
      class: "node", "data-start": n.start });
    rect.append(svgEl("title", {}, n.level + " " + fmtSpan(n.start, n.end) + ": " + n.text.slice(0, 200)));
    rect.addEventListener("click", () => showFrame(n.start));
    svg.append(rect);
  }
}

function addNodes(nodes) {
  const byId = new Map(state.nodes.map((n) => [n.id, n]));
  for (const n of nodes) byId.set(n.id, n);
  state.nodes = [...byId.values()].sort((a, b) => a.start - b.start || a.end - b.end).slice(-NODES_SHOWN);
  for (const n of nodes) spanNode(n);
  renderSpans();
  if (nodes.some((n) => summaryDepth(n.level))) renderSummaries();
}

// ------------------------------------------------------------------------------------------------ memory by span
// The memory list: one entry per coarse span, newest first, its coarse caption as the summary; its fine and
// ultra-fine captions (and speech) fold under it and are read from the memory API when it is first opened. Coarse
// spans come page by page (the API's level and time filters, bounded in SQL), never the whole stream at once.

const SPAN_PAGE = 20;         // coarse spans read per page
const SPANS_KEPT = 100;       // entries kept as a live stream adds spans (older ones are a click away)
const CHILD_PAGE = 500;       // a span's deeper nodes read per request
const LISTED = new Set(["coarse", "fine", "ultra_fine", "speech"]);  // summaries span many coarse spans: their own list
const SUMMARY_LEVEL = /^summary([1-9][0-9]?)$/;  // summary1 over coarse spans, summary2 over summary1, ...
const SUMMARY_PAGE = 20;      // summaries read per level
const summaries = { seq: 0, nodes: new Map() };
const spans = { seq: 0, groups: new Map(), oldest: null, more: false, seconds: {}, defaultPreset: null };

// Seconds between coarse span boundaries of the selected stream (its preset's; 60 until the feed says).
function coarseSeconds(name) {
  const s = state.streams.get(name || state.selected);
  const preset = (s && s.preset) || spans.defaultPreset;
  return spans.seconds[preset] || 60;
}

function spanKey(t) {
  const T = coarseSeconds();
  return Math.floor(t / T + 1e-9) * T;
}

function resetSpans() {
  spans.seq += 1;
  spans.groups = new Map();
  spans.oldest = null;
  spans.more = false;
  $("#nodes").replaceChildren();
  $("#older-spans").hidden = true;
  summaries.seq += 1;
  summaries.nodes = new Map();
  renderSummaries();
}

// ------------------------------------------------------------------------------------------------ summaries
// A long stream's questions write summaries above coarse memory (lucy/query/summaries.py): each covers several coarse
// spans, so none belongs to one span's entry. They are listed apart, above the spans and folded: coarsest level
// first, newest first within a level, each with the stretch it covers.

function summaryDepth(level) {
  const m = SUMMARY_LEVEL.exec(level || "");
  return m ? Number(m[1]) : 0;
}

function summaryNode(n) {
  summaries.nodes.set(n.id, n);
}

function renderSummaries() {
  const box = $("#summaries"), list = $("#summary-nodes");
  const nodes = [...summaries.nodes.values()].sort(
    (a, b) => summaryDepth(b.level) - summaryDepth(a.level) || b.start - a.start);
  box.hidden = !nodes.length;
  const levels = new Set(nodes.map((n) => n.level)).size;
  $("#summaries-summary").textContent = nodes.length + " " + (nodes.length === 1 ? "summary" : "summaries") +
    " of longer stretches (" + levels + " " + (levels === 1 ? "level" : "levels") + ")";
  list.replaceChildren(...nodes.map((n) => {
    const li = el("li", { class: "node-text summary-node", "data-level": n.level, "data-start": String(n.start) });
    nodeLine(n, li);
    return li;
  }));
}

// Each summary level's newest page, from summary1 up to the first level that has none (a level exists only over
// the one below it).
async function loadSummaries() {
  const name = state.selected, seq = summaries.seq;
  for (let depth = 1; depth < 100; depth += 1) {
    const params = new URLSearchParams({ level: "summary" + depth, latest: "true", limit: String(SUMMARY_PAGE) });
    const page = await getJSON(streamPath("/memory?" + params, name));
    if (seq !== summaries.seq) return;
    if (!page.nodes.length) break;
    for (const n of page.nodes) summaryNode(n);
  }
  renderSummaries();
}

function spanGroup(key) {
  let g = spans.groups.get(key);
  if (!g) {
    g = { start: key, end: key + coarseSeconds(), coarse: null, children: new Map(), loaded: false, el: null };
    spans.groups.set(key, g);
  }
  return g;
}

// One node into its span's entry: a coarse caption made at ingest is the entry's summary, anything else (deeper
// captions, a question's re-captioning of the span, speech) is a child. Nodes of spans older than the pages read
// wait for "older spans".
function spanNode(n) {
  if (summaryDepth(n.level)) { summaryNode(n); return; }
  if (!LISTED.has(n.level)) return;
  const key = spanKey(n.start);
  if (spans.oldest !== null && key < spans.oldest) return;
  const g = spanGroup(key);
  if (n.level === "coarse" && n.origin === "ingest" && (!g.coarse || g.coarse.id === n.id)) {
    g.coarse = n;
    g.end = Math.max(g.start, n.end);
  } else {
    g.children.set(n.id, n);
  }
  if (g.el) fillGroup(g);
}

function whenButton(n) {
  const when = el("button", { type: "button", class: "when link", title: "show the frame at " + fmtTime(n.start) },
                  fmtSpan(n.start, n.end));
  when.addEventListener("click", (event) => { event.preventDefault(); event.stopPropagation(); showFrame(n.start); });
  return when;
}

function nodeLine(n, parent) {
  parent.append(whenButton(n), el("span", { class: "badge lvl lvl-" + n.level }, n.level.replace("_", "-")));
  if (n.origin !== "ingest") parent.append(el("span", { class: "lvl muted" }, "question"));
  parent.append(el("span", { class: "text" }, n.text.length > 400 ? n.text.slice(0, 400) + "…" : n.text));
}

// Children of a span: each fine caption with the ultra-fine captions inside it folded under it; the rest (a
// question's captions of the whole span, ultra-fine without a fine one, speech) in time order beside them.
function childList(g) {
  const nodes = [...g.children.values()].sort((a, b) => a.start - b.start || b.end - a.end);
  const fine = nodes.filter((n) => n.level === "fine");
  const inner = new Map(fine.map((f) => [f.id, []]));
  const top = [];
  for (const n of nodes) {
    const host = n.level === "ultra_fine" && fine.find((f) => n.start >= f.start - 1e-6 && n.start < f.end);
    if (host) inner.get(host.id).push(n); else if (n.level !== "fine") top.push(n);
  }
  const ul = el("ul", { class: "children" });
  for (const n of [...fine, ...top].sort((a, b) => a.start - b.start || b.end - a.end)) {
    const li = el("li", { class: "node-text child" });
    const under = inner.get(n.id) || [];
    if (under.length) {
      const box = el("details");
      const summary = el("summary");
      nodeLine(n, summary);
      summary.append(el("span", { class: "muted count" }, " · " + under.length + " ultra-fine"));
      const ulf = el("ul", { class: "children" });
      for (const u of under) {
        const item = el("li", { class: "node-text child" });
        nodeLine(u, item);
        ulf.append(item);
      }
      box.append(summary, ulf);
      li.append(box);
    } else {
      nodeLine(n, li);
    }
    ul.append(li);
  }
  return ul;
}

function fillGroup(g) {
  const box = g.el.querySelector("details");
  const summary = box.querySelector("summary");
  summary.replaceChildren();
  if (g.coarse) {
    nodeLine(g.coarse, summary);
  } else {
    const open = { start: g.start, end: g.end, level: "coarse", origin: "ingest", text: "" };
    summary.append(whenButton(open), el("span", { class: "badge lvl lvl-coarse" }, "coarse"),
                   el("span", { class: "text muted" }, "span still open: its coarse caption comes when it closes"));
  }
  const body = box.querySelector(".body");
  if (!box.open) return;
  if (!g.loaded) { loadChildren(g); return; }
  body.replaceChildren(g.children.size ? childList(g) : el("p", { class: "muted" }, "no deeper captions of this span"));
}

function groupItem(g) {
  const li = el("li", { class: "span", "data-start": String(g.start) });
  const box = el("details");
  box.append(el("summary"), el("div", { class: "body" }));
  box.addEventListener("toggle", () => { if (box.open) fillGroup(g); });
  li.append(box);
  g.el = li;
  fillGroup(g);
  return li;
}

// The entries, newest span first; entries already on the page are moved, not made again (an open one stays open).
function renderSpans() {
  const list = $("#nodes");
  let keys = [...spans.groups.keys()].sort((a, b) => b - a);
  if (keys.length > SPANS_KEPT) {  // a long live stream: keep the newest, the rest are "older spans"
    for (const key of keys.slice(SPANS_KEPT)) {
      const g = spans.groups.get(key);
      if (g.el) g.el.remove();
      spans.groups.delete(key);
    }
    keys = keys.slice(0, SPANS_KEPT);
    spans.oldest = keys.at(-1);
    spans.more = true;
  }
  keys.forEach((key, i) => {
    const g = spans.groups.get(key);
    const li = g.el || groupItem(g);
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
  });
  $("#older-spans").hidden = !spans.more;
}

// A page of coarse spans: the newest ones, or (``before``) those that start before a time.
async function loadSpans(before) {
  const name = state.selected, seq = spans.seq;
  const params = new URLSearchParams({ level: "coarse", latest: "true", limit: String(SPAN_PAGE) });
  if (before !== undefined) params.set("to", String(before));
  const page = await getJSON(streamPath("/memory?" + params, name));
  if (seq !== spans.seq) return;
  const coarse = page.nodes.filter((n) => n.origin === "ingest");
  if (coarse.length || !page.truncated) {
    const first = coarse.length ? spanKey(coarse[0].start) : 0;
    spans.oldest = spans.oldest === null ? first : Math.min(spans.oldest, first);
  }
  spans.more = page.truncated;
  for (const n of page.nodes) spanNode(n);
  renderSpans();
}

// A span's deeper nodes, page by page (by start time: a page ends where the next begins; repeats are dropped).
async function loadChildren(g) {
  const name = state.selected, seq = spans.seq;
  g.loaded = true;
  const body = g.el.querySelector(".body");
  body.replaceChildren(el("p", { class: "muted" }, "loading…"));
  try {
    for (let from = g.start; ;) {
      const params = new URLSearchParams({ from: String(from), to: String(g.end), limit: String(CHILD_PAGE) });
      const page = await getJSON(streamPath("/memory?" + params, name));
      if (seq !== spans.seq) return;
      let fresh = 0;
      for (const n of page.nodes) {
        if (n.start < g.start - 1e-6 || n.start >= g.end || !LISTED.has(n.level) || g.children.has(n.id)) continue;
        if (g.coarse && n.id === g.coarse.id) continue;
        g.children.set(n.id, n);
        fresh += 1;
      }
      if (!page.truncated || !fresh) break;
      from = page.nodes.at(-1).start;
    }
  } catch (err) {
    g.loaded = false;
    body.replaceChildren(el("p", { class: "muted" }, "not loaded: " + (err.message || err)));
    return;
  }
  fillGroup(g);
}

$("#older-spans").addEventListener("click", () => {
  if (spans.oldest !== null) loadSpans(spans.oldest).catch((err) => setHealth(String(err.message || err), false));
});

// The frame at ``t`` of the selected stream, or of ``stream`` (an answer across streams names its evidence's).
async function showFrame(t, stream) {
  if (!state.selected && !stream) return;
  const res = await api(streamPath("/frames?width=480&t=" + t, stream));
  if (!res.ok) return;
  const img = $("#evidence-frame");
  if (img.dataset.url) URL.revokeObjectURL(img.dataset.url);
  img.dataset.url = URL.createObjectURL(await res.blob());
  img.src = img.dataset.url;
  img.title = "frame at " + fmtTime(Number(res.headers.get("X-Lucy-Frame-Time") || t));
  img.hidden = false;
}

// ------------------------------------------------------------------------------------------------ live view
// The selected stream's live picture: its MJPEG stream (/v1/streams/{name}/live.mjpeg), read with fetch (it sends the
// token, which an <img src> could not) and cut into its JPEG parts here. Open only while the panel is on screen and
// the page is visible; a stream that is not recording shows its last frame once. Each part says the media time of
// its frame and, for a live source, when it was taken: the note shows how far behind the glass it is.

const LIVE_RETRY_MS = 5000;   // after a refused or broken live view, the next try waits this long
const live = { controller: null, name: null, pictureOf: null, url: null, frames: 0, visible: true, retryAt: 0,
               arrivals: [] };

function liveNote(text) {
  $("#live-note").textContent = text;
}

function stopLive() {
  if (live.controller) live.controller.abort();
  live.controller = null;
  live.name = null;
}

// Open, keep or close the live view as the selection, the stream's state and the page's visibility say.
function syncLive() {
  const name = state.selected && !document.hidden && live.visible ? state.selected : null;
  const link = $("#review-link");
  link.hidden = !state.selected;
  if (state.selected) link.href = "/review/" + encodeURIComponent(state.selected);
  if (!name) {
    if (live.name) { stopLive(); liveNote(state.selected ? "paused while hidden" : ""); }
    if (!state.selected) {
      live.pictureOf = null;
      $("#live-picture").hidden = true;
      $("#live-empty").hidden = false;
    }
    return;
  }
  if (name !== live.name) {
    stopLive();
    live.name = name;
    live.frames = 0;
    live.retryAt = 0;
    if (live.pictureOf !== name) { $("#live-picture").hidden = true; $("#live-empty").hidden = false; }
  }
  const s = state.streams.get(name);
  const done = live.frames > 0 && !(s && ACTIVE.has(s.state));  // it shows the last frame a stream will have
  if (live.controller && done) {
    live.controller.abort();
    live.controller = null;
    liveNote($("#live-note").textContent + " · " + s.state);
  }
  if (live.controller || done || Date.now() < live.retryAt) return;
  openLive(name);
}

// The parts of a multipart/x-mixed-replace response: {headers, body} each (body: the part's bytes). Every part of
// Lucy's stream has a Content-Length, which says where its bytes end.
async function* multipartParts(res) {
  const reader = res.body.getReader();
  let buf = new Uint8Array(0);
  const more = async () => {
    const { value, done } = await reader.read();
    if (done) return false;
    const joined = new Uint8Array(buf.length + value.length);
    joined.set(buf);
    joined.set(value, buf.length);
    buf = joined;
    return true;
  };
  const headEnd = () => {
    for (let i = 0; i + 3 < buf.length; i++) {
      if (buf[i] === 13 && buf[i + 1] === 10 && buf[i + 2] === 13 && buf[i + 3] === 10) return i;
    }
    return -1;
  };
  for (;;) {
    let end;
    while ((end = headEnd()) < 0) if (!(await more())) return;
    const headers = {};
    for (const line of new TextDecoder().decode(buf.subarray(0, end)).split("\r\n")) {
      const colon = line.indexOf(":");
      if (colon <= 0 || line.startsWith("--")) continue;  // the boundary line, or the blank line before it
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers["content-length"]);
    if (!Number.isFinite(length)) throw new Error("a live part without Content-Length");
    const start = end + 4;
    while (buf.length < start + length) if (!(await more())) return;
    yield { headers: headers, body: buf.slice(start, start + length) };
    buf = buf.slice(start + length);
  }
}

async function openLive(name) {
  const controller = new AbortController();
  live.controller = controller;
  live.name = name;
  live.frames = 0;
  live.arrivals = [];
  liveNote("connecting…");
  try {
    const res = await api(streamPath("/live.mjpeg", name), { signal: controller.signal });
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      live.retryAt = Date.now() + LIVE_RETRY_MS;
      liveNote("no live view: " + errorMessage(body, res.status));
      return;
    }
    liveNote("waiting for frames…");
    for await (const part of multipartParts(res)) {
      if (controller.signal.aborted) return;
      showLive(part);
      const s = state.streams.get(name);
      if (s && !ACTIVE.has(s.state)) { syncLive(); break; }
    }
  } catch (err) {
    if (controller.signal.aborted) return;
    live.retryAt = Date.now() + LIVE_RETRY_MS;
    liveNote("live view lost: " + (err.message || err));
  } finally {
    if (live.controller === controller) { controller.abort(); live.controller = null; }
  }
}

function showLive(part) {
  const now = Date.now();
  const img = $("#live-picture");
  const url = URL.createObjectURL(new Blob([part.body], { type: "image/jpeg" }));
  const old = live.url;
  img.onload = () => { if (old) URL.revokeObjectURL(old); };
  img.src = url;
  live.url = url;
  img.hidden = false;
  $("#live-empty").hidden = true;
  live.pictureOf = live.name;
  live.frames += 1;
  live.arrivals.push(now);
  if (live.arrivals.length > 10) live.arrivals.shift();
  const t = Number(part.headers["x-lucy-frame-time"]);
  const wall = Number(part.headers["x-lucy-frame-wall"]);
  img.dataset.frames = String(live.frames);
  img.dataset.frameTime = String(t);
  const figures = ["frame at " + fmtTime(t)];
  if (part.headers["x-lucy-frame-wall"] && Number.isFinite(wall)) {
    const behind = Math.max(0, now / 1000 - wall);
    img.dataset.latency = behind.toFixed(3);
    figures.push(behind.toFixed(1) + " s behind");
  }
  const n = live.arrivals.length;
  if (n >= 3) figures.push((1000 * (n - 1) / (live.arrivals[n - 1] - live.arrivals[0])).toFixed(1) + " fps");
  liveNote(figures.join(" · "));
}

new IntersectionObserver((entries) => {
  live.visible = entries.some((e) => e.isIntersecting);
  syncLive();
}).observe($("#live-panel"));
document.addEventListener("visibilitychange", syncLive);

// ------------------------------------------------------------------------------------------------ host

function showHost(h) {
  state.hostNow = h;
  const mem = fmtBytes(h.memory_used_bytes) + " / " + fmtBytes(h.memory_total_bytes);
  const disk = h.disk_free_bytes === null ? "" : " · disk " + fmtBytes(h.disk_free_bytes) + " free";
  $("#host").textContent = "CPU " + Math.round(h.cpu_percent) + "% · memory " + mem + disk;
  $("#host-detail").textContent = h.cpus + " CPUs · load " + h.load1.toFixed(2) + " · server process " +
    fmtBytes(h.server_rss_bytes) + ", " + Math.round(h.server_cpu_percent || 0) + "% CPU · memory " +
    Math.round(h.memory_percent) + "% used" + (disk ? " ·" + disk.slice(2) : "");
}

// ------------------------------------------------------------------------------------------------ the feed

const feed = { controller: null, wake: null, redraw: false };

function setHealth(text, ok) {
  $("#health").textContent = text;
  $("#health").className = "badge " + (ok ? "ok" : "bad");
}

function onHello(data) {
  state.streams = new Map(data.streams.map((s) => [s.name, s]));
  state.host = data.host_history.slice();
  spans.seconds = data.coarse_span_seconds || {};
  spans.defaultPreset = data.default_preset;
  showHost(data.host);
  fillForm(data);
  renderStreams();
  drawHost();
  if (state.selected && !state.streams.has(state.selected)) clearSelection();
  if (!state.selected && state.streams.size) select([...state.streams.keys()].sort()[0]);
}

function onTick(data) {
  for (const [name, changes] of Object.entries(data.streams || {})) mergeStatus(name, changes);
  if (data.removed && data.removed.length) removeStreams(data.removed);
  const points = data.points && state.selected ? data.points[state.selected] : null;
  if (points && (!state.points.length || points.t > state.points.at(-1).t)) {
    state.points.push(points);
    if (state.points.length > HISTORY_POINTS) state.points.shift();
  }
  if (data.host) {
    showHost(data.host);
    state.host.push({ t: data.host.t, cpu_percent: data.host.cpu_percent, memory_percent: data.host.memory_percent });
    if (state.host.length > 300) state.host.shift();
    drawHost();
  }
  renderStreams();
  if (state.selected && state.streams.has(state.selected)) {
    drawSelected();
    const answered = state.streams.get(state.selected).questions.answered;
    if (answered !== state.answered) { state.answered = answered; loadQuestions(); }
    refreshObjects();
  }
  syncLive();
  if (data.ready !== undefined) setHealth(data.ready ? "live" : "starting", data.ready);
  state.ticks += 1;
  document.body.dataset.ticks = String(state.ticks);
  $("#host").dataset.updated = fmtClock(Date.now() / 1000);
}

function onNode(node) {
  if (node.stream !== state.selected) return;
  addNodes([node]);
  if (!feed.redraw) {  // many nodes at once (a question's deeper captions) redraw the timeline once
    feed.redraw = true;
    requestAnimationFrame(() => { feed.redraw = false; drawSelected(); });
  }
}

function sleep(ms) {
  return new Promise((resolve) => { feed.wake = resolve; setTimeout(resolve, ms); });
}

async function follow() {
  for (let delay = 1000; ; delay = Math.min(delay * 2, 15000)) {
    feed.controller = new AbortController();
    try {
      const res = await api("/v1/dashboard/events", { signal: feed.controller.signal,
                                                      headers: { "Accept": "text/event-stream" } });
      if (!res.ok) throw new Error("HTTP " + res.status);
      for await (const [kind, data] of serverEvents(res)) {
        if (kind === "hello") { onHello(data); setHealth(data.ready ? "live" : "starting", data.ready); delay = 1000; }
        else if (kind === "tick") onTick(data);
        else if (kind === "node") onNode(data);
        else if (kind === "alert") onAlert(data);
      }
      setHealth("reconnecting…", false);
    } catch (err) {
      setHealth(feed.controller.signal.aborted ? "reconnecting…" : String(err.message || err), false);
    }
    await sleep(delay);
  }
}

window.addEventListener("resize", () => { drawSelected(); drawHost(); });
// Leaving the page closes the feed at once (a browser keeps only six connections to a server; the loop above
// reconnects if the page is shown again from the back-forward cache).
window.addEventListener("pagehide", () => { if (feed.controller) feed.controller.abort(); stopLive(); });

// ------------------------------------------------------------------------------------------------ the add form

function fillForm(hello) {
  const preset = $("#add-preset");
  if (!preset.options.length) {
    for (const name of hello.presets) {
      const option = el("option", { value: name }, name === hello.default_preset ? name + " (default)" : name);
      if (name === hello.default_preset) option.selected = true;
      preset.append(option);
    }
  }
  const captioner = $("#add-captioner");
  if (captioner.options.length <= 1) {
    captioner.options[0].textContent = "captioner: " + hello.default_captioner + " (default)";
    for (const name of hello.captioners) captioner.append(el("option", { value: name }, name));
  }
}

$("#add-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { name: $("#add-name").value.trim(), source: $("#add-source").value.trim(),
                 realtime: $("#add-realtime").checked };
  if ($("#add-preset").value) body.preset = $("#add-preset").value;
  if ($("#add-captioner").value) body.captioner = $("#add-captioner").value;
  try {
    const res = await api("/v1/streams", { method: "POST", body: JSON.stringify(body),
                                            headers: { "Content-Type": "application/json" } });
    const out = await res.json().catch(() => ({}));
    $("#add-result").textContent = res.ok ? "started " + out.name : "refused: " + errorMessage(out, res.status);
    if (res.ok) {
      mergeStatus(out.name, out);
      select(out.name);
    }
  } catch (err) {
    $("#add-result").textContent = String(err.message || err);
  }
});

// ------------------------------------------------------------------------------------------------ asking

// "1 round", "2 rounds": a count and its noun, as the command line writes them.
function counted(n, noun) {
  return n + " " + (n === 1 ? noun : noun + "s");
}

// Text cut to max characters at a word boundary, an ellipsis marking the cut (as lucy.query.text.clip_words).
function clipWords(text, max) {
  if (text.length <= max) return text;
  let cut = text.slice(0, max - 1);
  if (!/\s/.test(text[max - 1])) {
    const boundary = cut.search(/\s\S*$/);
    if (boundary >= Math.floor(max / 2)) cut = cut.slice(0, boundary);
  }
  return cut.trimEnd().replace(/[,;:\-–(]+$/, "").trimEnd() + "…";
}

// A trace step in one line, as ``lucy ask`` prints it: what to look for cut at a word, tokens only where a model
// counted them.
function traceLine(step) {
  const oneLine = (t) => String(t).split(/\s+/).filter(Boolean).join(" ");
  let where = "";
  if (step.start !== null && step.end !== null && step.start !== undefined) {
    where = " " + (step.level || "") + " " + fmtSpan(step.start, step.end);
  }
  let text = "#" + step.index + " " + step.agent + where;
  if (step.detail) text += " | " + oneLine(step.detail);
  if (step.instruction) text += " | look for: " + clipWords(oneLine(step.instruction), 100);
  if (step.error) text += " | ERROR: " + oneLine(step.error);
  if (step.prompt_tokens || step.completion_tokens) {
    text += " [" + step.prompt_tokens + "+" + step.completion_tokens + " tok]";
  }
  return text;
}

// What an answer cost, in words: "1 round · 3 LLM calls · 0 captions" (tokens where a model counted them).
function answerFigures(a) {
  let text = counted(a.iterations, "round") + " · " + counted(a.llm_calls, "LLM call") + " · " +
    counted(a.caption_calls, "caption");
  if (a.prompt_tokens || a.completion_tokens) text += " · " + a.prompt_tokens + "+" + a.completion_tokens + " tokens";
  return text;
}

function evidenceLinks(evidence) {
  const ev = el("div", { class: "evidence-list" });
  for (const span of evidence || []) {
    const label = (span.stream && span.stream !== state.selected ? span.stream + " " : "") +
      fmtSpan(span.start, span.end);
    const a = el("button", { type: "button", class: "evidence link" }, label);
    a.addEventListener("click", (event) => { event.stopPropagation(); showFrame(span.start, span.stream); });
    ev.append(a);
  }
  return ev;
}

function showAnswer(answer) {
  const box = $("#answer");
  box.replaceChildren();
  box.className = answer.confident ? "" : "unsure";
  box.append(el("strong", { class: "text" }, answer.answer || "(no answer)"));
  box.append(el("div", { class: "muted" }, (answer.confident ? "confident" : "not confident") + " · " +
    answerFigures(answer)));
  box.append(evidenceLinks(answer.evidence));
  box.hidden = false;
  if (answer.evidence && answer.evidence.length) showFrame(answer.evidence[0].start, answer.evidence[0].stream);
}

function handleEvent(kind, data) {
  if (kind === "step") {
    const li = el("li", { class: "step" + (data.error ? " error" : "") }, traceLine(data));
    $("#trace").append(li);
    li.scrollIntoView({ block: "nearest" });
  } else if (kind === "answer") {
    showAnswer(data);
  } else if (kind === "error") {
    $("#trace").append(el("li", { class: "error" }, "error: " + (data.detail || errorMessage(data, data.status))));
  }
}

// The events of a server-sent-events response, as [kind, parsed data] (fetch, not EventSource: it sends the
// token); keep-alive comments and events without data are skipped. Lines may end in \n, \r\n or \r.
async function* serverEvents(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
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

// A question about the selected stream, or (``across``) about every stream at once: POST /v1/questions, whose
// evidence spans name their stream.
async function ask(question, across) {
  $("#trace").replaceChildren();
  $("#answer").hidden = true;
  const button = $("#ask-button");
  button.disabled = true;
  try {
    const res = await api(across ? "/v1/questions" : streamPath("/questions"), {
      method: "POST", body: JSON.stringify({ question: question }),
      headers: { "Content-Type": "application/json", "Accept": "text/event-stream" } });
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      handleEvent("error", { detail: errorMessage(body, res.status) });
      return;
    }
    for await (const [kind, data] of serverEvents(res)) handleEvent(kind, data);
  } catch (err) {
    handleEvent("error", { detail: String(err.message || err) });
  } finally {
    button.disabled = false;
    loadQuestions();
  }
}

// The selected stream's recent questions and their answers, newest first (loaded again when the pushed figures
// say another question was answered).
async function loadQuestions() {
  const name = state.selected;
  if (!name) return;
  try {
    const body = await getJSON(streamPath("/questions?limit=20", name));
    if (name !== state.selected) return;
    for (const url of questions.blobs) URL.revokeObjectURL(url);
    questions.blobs = [];
    const items = body.questions.map(questionItem);
    $("#question-list").replaceChildren(...items);
    $("#no-questions").hidden = items.length > 0;
  } catch (err) {
    $("#no-questions").hidden = false;
    $("#no-questions").textContent = String(err.message || err);
  }
}

// ``open``: ids of the history's questions opened by the user (kept open when the list is loaded again).
const questions = { open: new Set(), blobs: [] };

// A question of the history: a summary line (when, the question, the options asked with the one chosen, the
// answer) that opens on a click or Enter into the answer's figures, its reason, evidence with frames, and trace.
function questionItem(q) {
  const li = el("li", { class: "question", "data-id": String(q.id) });
  const box = el("details");
  const summary = el("summary");
  const head = el("div", { class: "q" });
  head.append(el("span", { class: "asked muted" }, fmtClock(q.asked)), el("span", { class: "text" }, q.question));
  summary.append(head);
  const a = q.answer;
  if (q.options && q.options.length) summary.append(optionList(q.options, a ? a.option_index : null));
  if (a) {
    const ans = el("div", { class: "a" });
    const badge = el("span", { class: "badge " + (a.confident ? "ok" : "unsure") },
                     a.confident ? "confident" : "not sure");
    ans.append(badge, el("span", { class: "text" }, a.answer || "(no answer)"));
    summary.append(ans);
  } else {
    summary.append(el("div", { class: "a muted" }, "no answer (still running, or it failed)"));
  }
  const detail = el("div", { class: "detail" });
  box.append(summary, detail);
  const fill = () => { if (!detail.childElementCount) detail.append(...answerDetail(q)); };
  box.addEventListener("toggle", () => {
    if (box.open) { questions.open.add(q.id); fill(); } else questions.open.delete(q.id);
  });
  if (questions.open.has(q.id)) { box.open = true; fill(); }
  li.append(box);
  return li;
}

function optionList(options, chosen) {
  const ul = el("ul", { class: "options", "aria-label": "options asked" });
  options.forEach((text, i) => {
    const picked = i === chosen;
    const li = el("li", picked ? { class: "chosen", title: "the option answered" } : {});
    li.append(el("span", { class: "letter" }, String.fromCharCode(65 + (i % 26)) + (i >= 26 ? String(i) : "") + "."),
              document.createTextNode(" " + text + (picked ? " ✓" : "")));
    ul.append(li);
  });
  return ul;
}

function answerDetail(q) {
  const a = q.answer;
  if (!a) return [el("p", { class: "muted" }, "No answer stored: the question is still running, or it failed.")];
  const out = [el("p", { class: "muted figures" }, (a.confident ? "confident" : "not confident") + " · " +
    answerFigures(a) + " · up to " +
    fmtTime(a.horizon) + " of video" + (a.wall_seconds !== undefined ? " · took " + fmtTime(a.wall_seconds) : ""))];
  if (a.reason) out.push(el("p", { class: "reason" }, a.reason));
  for (const e of a.errors || []) out.push(el("p", { class: "error" }, "error: " + e));
  if (a.evidence && a.evidence.length) {
    const frames = el("ul", { class: "evidence-frames", "aria-label": "evidence" });
    for (const span of a.evidence) frames.append(evidenceItem(span));
    out.push(frames);
  }
  if (a.trace && a.trace.length) {
    const trace = el("ol", { class: "trace", "aria-label": "trace" });
    for (const step of a.trace) {
      trace.append(el("li", { class: "step" + (step.error ? " error" : "") }, traceLine(step)));
    }
    out.push(trace);
  }
  return out;
}

// One evidence span: its frame (when the API has one kept: frame_url) and its time, which shows the frame larger in
// the Ask panel.
function evidenceItem(span) {
  const li = el("li", { class: "evidence-item" });
  if (span.frame_url) {
    const img = el("img", { class: "thumb", alt: "frame at " + fmtTime((span.start + span.end) / 2) });
    api(span.frame_url + "&width=320")
      .then((res) => (res.ok ? res.blob() : Promise.reject(new Error("HTTP " + res.status))))
      .then((blob) => { const url = URL.createObjectURL(blob); questions.blobs.push(url); img.src = url; })
      .catch(() => img.replaceWith(thumbPlaceholder("frame unavailable")));
    li.append(img);
  } else {
    li.append(thumbPlaceholder("no frame kept"));
  }
  const when = el("button", { type: "button", class: "evidence link" }, fmtSpan(span.start, span.end));
  when.addEventListener("click", () => showFrame(span.start));
  li.append(when);
  return li;
}

// ------------------------------------------------------------------------------------------------ searching

const search = { timer: null, controller: null, seq: 0, blobs: [], observer: null };

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
    const img = el("img", { class: "thumb", alt: "frame at " + fmtTime((hit.start + hit.end) / 2),
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
  meta.append(el("span", { class: "when" }, fmtSpan(hit.start, hit.end)),
              el("span", { class: "badge level lvl-" + hit.level }, hit.level),
              el("span", { class: "score", title: how.join(", ") },
                 [hit.lexical_rank !== null ? "words" : "", hit.semantic_rank !== null ? "meaning" : ""]
                   .filter(Boolean).join(" + ")));
  if (hit.origin !== "ingest") meta.append(el("span", { class: "muted" }, "question"));
  // Collapsed, a hit shows the line that matched best (the server's snippet); opened, its whole text.
  const short = () => hit.snippet || excerpt(hit.text, words);
  const caption = el("p", { class: "caption" });
  caption.append(highlighted(short(), words));
  const body = el("div", { class: "body" });
  body.append(meta, caption);
  card.append(body);
  const toggle = () => {
    const open = card.classList.toggle("expanded");
    card.setAttribute("aria-expanded", String(open));
    caption.replaceChildren(highlighted(open ? hit.text : short(), words));
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
  searchStatus(!result.no_match ? "" : "No memory of " + result.stream + " matches “" + q +
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
    const res = await api(streamPath("/search?" + params, name), { signal: search.controller.signal });
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
  const across = $("#ask-all").checked;
  if (q && (state.selected || across)) ask(q, across);
});

$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("#token-input").value.trim();
  sessionStorage.setItem("lucyToken", state.token);
  $("#token-box").hidden = true;
  if (feed.controller) feed.controller.abort();
  if (feed.wake) feed.wake();  // reconnect now, with the token
});

// ------------------------------------------------------------------------------------------------ watches
// Watches of the selected stream and its alert history; new alerts come with the feed. Questions and reasons are
// untrusted text: textContent only.

const watches = { seq: 0, shown: new Set() };

async function refreshWatches() {
  const body = await getJSON(streamPath("/watches"));
  const items = body.watches.map((w) => {
    const li = el("li", {}, w.question + " (cooldown " + fmtTime(w.cooldown_seconds) + ") ");
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
  const text = el("div", {}, fmtSpan(a.start, a.end) + " · " + a.question + " — " + a.reason);
  const li = el("li", { class: "alert", "data-id": String(a.id) });
  li.append(img, text);
  return li;
}

// An alert pushed by the feed: shown when it is the selected stream's (once: the history may have it already).
function onAlert(a) {
  if (a.stream !== state.selected || watches.shown.has(a.id)) return;
  watches.shown.add(a.id);
  $("#alert-list").prepend(alertItem(a));
}

async function loadWatches() {
  const seq = ++watches.seq;
  watches.shown = new Set();
  $("#alert-list").replaceChildren();
  try {
    await refreshWatches();
    const history = await getJSON(streamPath("/alerts?limit=50"));
    if (seq !== watches.seq) return;
    const fresh = history.alerts.filter((a) => !watches.shown.has(a.id));
    for (const a of fresh) watches.shown.add(a.id);
    // oldest first from the API, newest first here; pushed ones (newer) stay on top
    $("#alert-list").append(...fresh.sort((a, b) => b.id - a.id).map(alertItem));
  } catch (err) {
    $("#watch-result").textContent = String(err.message || err);
  }
}

// ------------------------------------------------------------------------------------------------ tracked objects
// The objects the detect stage followed (one per object, as Frigate's events), newest first, each with the snapshot
// of its best frame; a mark each on a strip over the stream's time. Labels and attributes are data read from video:
// shown as text only. Read again (at most every OBJECTS_MS) while the detect stage writes track records.

const OBJECTS_SHOWN = 60;
const OBJECTS_MS = 5000;
const OBJECTS_WINDOW = 3600;  // seconds of the stream's newest media time whose objects are read
const OBJECTS_READ = 2000;
const OBJECT_COLOURS = { person: "#2f6fdf", vehicle: "#c0691f", animal: "#1f9d6b" };
const VEHICLE_LABELS = new Set(["car", "truck", "bus", "motorcycle", "train", "boat", "airplane"]);
const ANIMAL_LABELS = new Set(["bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe"]);
const objectsView = { seq: 0, loadedAt: 0, until: null, tracks: null, snapshots: new Map(), list: [] };

function objectKind(label) {
  if (label === "person") return "person";
  return VEHICLE_LABELS.has(label) ? "vehicle" : ANIMAL_LABELS.has(label) ? "animal" : "";
}

function objectSnapshot(o) {
  if (!o.snapshot_url) return thumbPlaceholder("no snapshot");  // none was kept
  let url = objectsView.snapshots.get(o.id);
  const img = el("img", { class: "thumb", alt: "snapshot of " + o.label });
  if (url) { img.src = url; return img; }
  api(o.snapshot_url).then((res) => (res.ok ? res.blob() : Promise.reject(new Error("HTTP " + res.status))))
    .then((blob) => {
      url = URL.createObjectURL(blob);  // kept while the stream is selected: a snapshot is fetched once
      objectsView.snapshots.set(o.id, url);
      img.src = url;
    })
    .catch(() => img.replaceWith(thumbPlaceholder("no snapshot")));
  return img;
}

function objectItem(o) {
  const li = el("li", { class: "object" + (o.active ? " active" : ""), "data-id": String(o.id),
                        title: "show the frame of its best view (" + fmtTime(o.best_time) + ")" });
  const text = el("div");
  text.append(el("b", { class: "label" }, o.label), document.createTextNode(" #" + o.id + " · " +
    fmtSpan(o.first_seen, o.last_seen) + " (" + fmtTime(o.dwell) + ")"));
  const way = "from " + o.entered + " → " + (o.exited === null ? "still in view" : o.exited) + " · " +
    (o.moving ? "moving" : "stationary");
  text.append(el("div", { class: "muted" }, way));
  const attributes = Object.entries(o.attributes || {}).map(([k, v]) => k + " " + v).join(", ");
  if (attributes) text.append(el("div", { class: "attributes" }, attributes));
  li.append(objectSnapshot(o), text);
  li.addEventListener("click", () => showFrame(o.best_time));
  return li;
}

function drawObjectMarks() {
  const svg = $("#object-marks");
  svg.replaceChildren();
  const W = Math.max(200, Math.round(svg.clientWidth || 600)), H = 34, pad = 6;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const list = objectsView.list;
  const s = state.streams.get(state.selected);
  const end = Math.max(s ? s.ingested_until : 0, ...list.map((o) => o.last_seen), 1);
  const start = Math.max(0, Math.min(...list.map((o) => o.first_seen), end));
  const x = (t) => pad + (W - 2 * pad) * (t - start) / Math.max(1e-6, end - start);
  const rows = 3, rowH = (H - 2 * pad) / rows;
  list.forEach((o, i) => {
    const rect = svgEl("rect", { x: x(o.first_seen).toFixed(1), y: (pad + (i % rows) * rowH).toFixed(1),
      width: Math.max(2, x(o.last_seen) - x(o.first_seen)).toFixed(1), height: (rowH - 1).toFixed(1),
      fill: OBJECT_COLOURS[objectKind(o.label)] || "#777", class: "object", "data-id": String(o.id) });
    rect.append(svgEl("title", {}, o.label + " #" + o.id + " " + fmtSpan(o.first_seen, o.last_seen)));
    rect.addEventListener("click", () => showFrame(o.best_time));
    svg.append(rect);
  });
}

function resetObjects() {
  objectsView.seq += 1;
  for (const url of objectsView.snapshots.values()) URL.revokeObjectURL(url);
  objectsView.snapshots = new Map();
  objectsView.list = [];
  objectsView.loadedAt = 0;
  objectsView.until = null;
  objectsView.tracks = null;
  $("#object-list").replaceChildren();
  $("#objects-note").textContent = "";
  drawObjectMarks();
}

async function loadObjects() {
  if (!state.selected) return;
  const seq = ++objectsView.seq;
  const s = state.streams.get(state.selected);
  objectsView.loadedAt = Date.now();
  objectsView.until = s ? s.ingested_until : null;
  objectsView.tracks = trackRecords(s);
  try {
    const from = Math.max(0, (objectsView.until || 0) - OBJECTS_WINDOW);  // a day's tracks would be megabytes
    const body = await getJSON(streamPath("/objects?limit=" + OBJECTS_READ + (from > 0 ? "&from=" + from : "")));
    if (seq !== objectsView.seq) return;
    objectsView.list = body.objects;
    const shown = body.objects.slice(-OBJECTS_SHOWN).reverse();
    $("#object-list").replaceChildren(...shown.map(objectItem));
    $("#objects-note").textContent = body.objects.length ? counted(body.objects.length, "object") +
      (body.objects.length > OBJECTS_SHOWN ? ", the newest " + OBJECTS_SHOWN + " listed" : "") +
      (body.truncated ? " (the first " + body.objects.length + " of more)" : "") +
      (from > 0 ? " in the last " + fmtTime(OBJECTS_WINDOW) : "") : "none tracked";
    drawObjectMarks();
  } catch (err) {
    $("#objects-note").textContent = String(err.message || err);
  }
}

// On each tick: read the objects again once the pushed status says the detect stage wrote track records since the
// last read (its "tracks" figure moved) and OBJECTS_MS have passed, and once more when the stage stops; a stream
// no detector runs on is read once, when it is selected.
function trackRecords(s) {
  return s && s.detect ? s.detect.tracks : null;
}

function refreshObjects() {
  const s = state.streams.get(state.selected);
  if (!s || trackRecords(s) === objectsView.tracks || Date.now() - objectsView.loadedAt < OBJECTS_MS) return;
  loadObjects();
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
  $("#watch-result").textContent = res.ok ? "watching" : "refused: " + errorMessage(out, res.status);
  if (res.ok) { $("#watch-question").value = ""; refreshWatches(); }
});

clearSelection();
drawHost();
follow();
