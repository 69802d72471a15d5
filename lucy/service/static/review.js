// Lucy's review page: one stream's time as a timeline (stored frames and gaps, tracked objects, alerts, on-screen
// text read, answered questions' evidence), a frame on hover, a clip on click or Enter. Plain JS, no build step, no
// external resources. Everything it draws comes from one request (GET /v1/streams/{name}/timeline), read again while
// the page is visible. Text read from video goes in with textContent only, never as HTML.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const RELOAD_MS = 15000;      // the timeline is read again this often while the page is visible
const HOVER_DELAY_MS = 120;   // the pointer rests this long before its frame is fetched
const STILL_DELAY_MS = 150;   // the cursor rests this long (arrow keys) before its frame is fetched
const CLIP_SECONDS = 20;      // a click or Enter away from any event plays this long from there
const MIN_CLIP_SECONDS = 4;   // an event shorter than this plays this long, around it
const MAX_CLIP_SECONDS = 120;
const EVENTS_SHOWN = 400;
const LABEL_W = 64, LANE_H = 18, LANE_GAP = 4, AXIS_H = 20, PAD = 6;
const OBJECT_ROWS = 3;
const COLOURS = { stored: "#1f9d6b", recorded: "#4b7f9e", gap: "#d9534f", expired: "#c3c8d0", person: "#2f6fdf", vehicle: "#c0691f",
                  animal: "#7a9d1f", object: "#777", alert: "#c0392b", text: "#7a4fb0", answer: "#15356b" };
const VEHICLE_LABELS = new Set(["car", "truck", "bus", "motorcycle", "train", "boat", "airplane", "bicycle"]);
const ANIMAL_LABELS = new Set(["bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe"]);
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];

const name = decodeURIComponent(location.pathname.replace(/^\/review\//, "").replace(/\/+$/, ""));
const view = {
  token: sessionStorage.getItem("lucyToken") || "", data: null, events: [], cursor: 0, start: 0, end: 1,
  hoverTimer: null, hoverAt: null, stillTimer: null, thumbs: new Map(), stillUrl: null, clipUrl: null, seq: 0,
};

const $ = (sel) => document.querySelector(sel);

// ------------------------------------------------------------------------------------------------ helpers
// (the token as the dashboard keeps it, in the tab's session storage; time formats and el() are common.js's)

function headers() {
  return view.token ? { "Authorization": "Bearer " + view.token } : {};
}

async function api(path, options) {
  const res = await fetch(path, Object.assign({}, options || {}, { headers: headers() }));
  if (res.status === 401) {
    $("#token-box").hidden = false;
    throw new Error("API token needed");
  }
  return res;
}

function svgEl(tag, attrs, title) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (title !== undefined) {
    const t = document.createElementNS(SVG_NS, "title");
    t.textContent = title;
    node.append(t);
  }
  return node;
}

function streamPath(rest) {
  return "/v1/streams/" + encodeURIComponent(name) + rest;
}

function objectKind(label) {
  if (label === "person") return "person";
  return VEHICLE_LABELS.has(label) ? "vehicle" : ANIMAL_LABELS.has(label) ? "animal" : "object";
}

// ------------------------------------------------------------------------------------------------ events
// Everything on the timeline as one list in time order: {kind, start, end, text, detail, lane, row, item}.

function buildEvents(d) {
  const out = [];
  for (const o of d.objects) {
    const attributes = Object.entries(o.attributes || {}).map(([k, v]) => k + " " + v).join(", ");
    out.push({ kind: "object", colour: COLOURS[objectKind(o.label)], start: o.first_seen, end: o.last_seen,
               text: o.label + " #" + o.id, detail: [o.moving ? "moving" : "stationary", attributes]
                 .filter(Boolean).join(" · "), item: o });
  }
  for (const a of d.alerts) {
    out.push({ kind: "alert", colour: COLOURS.alert, start: a.start, end: a.end, text: a.question,
               detail: a.reason, item: a });
  }
  for (const t of d.texts) {
    out.push({ kind: "text", colour: COLOURS.text, start: t.start, end: t.end, text: "“" + t.text + "”",
               detail: [t.where, t.colours].filter(Boolean).join(" · "), item: t });
  }
  for (const q of d.questions) {
    for (const e of q.evidence) {
      out.push({ kind: "answer", colour: COLOURS.answer, start: e.start, end: e.end, text: q.question,
                 detail: (q.confident ? "" : "not sure: ") + (q.answer || "(no answer)"), item: q });
    }
  }
  for (const g of d.gaps) {
    out.push({ kind: "gap", colour: COLOURS.gap, start: g.start, end: g.end, text: "no video",
               detail: g.reason || "", item: g });
  }
  out.sort((a, b) => a.start - b.start || a.end - b.end);
  // objects on up to OBJECT_ROWS rows, each where the row is free
  const rowEnds = new Array(OBJECT_ROWS).fill(-Infinity);
  for (const e of out) {
    if (e.kind !== "object") continue;
    let row = rowEnds.findIndex((t) => t <= e.start);
    if (row < 0) row = rowEnds.indexOf(Math.min(...rowEnds));
    e.row = row;
    rowEnds[row] = e.end;
  }
  return out;
}

// ------------------------------------------------------------------------------------------------ drawing

// The lanes, top to bottom; "recorded" only where the stream's original video is recorded (recording on, a live
// source).
function lanes() {
  const recorded = view.data && view.data.recordings && view.data.recordings.length;
  return [
    { key: "stored", label: "frames", rows: 1 },
    ...(recorded ? [{ key: "recorded", label: "recorded", rows: 1 }] : []),
    { key: "object", label: "objects", rows: OBJECT_ROWS },
    { key: "alert", label: "alerts", rows: 1 },
    { key: "text", label: "text", rows: 1 },
    { key: "answer", label: "answers", rows: 1 },
  ];
}

function geometry() {
  const svg = $("#review-timeline");
  const W = Math.max(240, Math.round(svg.clientWidth || 600));
  const narrow = W < 520;
  const left = narrow ? 48 : LABEL_W;
  const rowH = narrow ? 14 : LANE_H;
  let y = PAD;
  const rows = {};
  for (const lane of lanes()) {
    rows[lane.key] = { y: y, h: rowH * lane.rows / (lane.rows > 1 ? 1.6 : 1), label: lane.label };
    y += rows[lane.key].h + LANE_GAP;
  }
  const H = y + AXIS_H;
  const x = (t) => left + (W - left - PAD) * (t - view.start) / Math.max(1e-6, view.end - view.start);
  const t = (px) => view.start + (px - left) * (view.end - view.start) / Math.max(1, W - left - PAD);
  return { svg: svg, W: W, H: H, left: left, rows: rows, x: x, t: t };
}

function niceTicks(lo, hi, count) {
  const span = Math.max(hi - lo, 1e-9);
  const step = TIME_STEPS.find((s) => span / s <= count) || TIME_STEPS[TIME_STEPS.length - 1];
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(v);
  return out;
}

function bar(g, lane, e, rowCount) {
  const r = g.rows[lane];
  const h = rowCount ? r.h / rowCount : r.h;
  const y = r.y + (rowCount ? (e.row || 0) * h : 0);
  const x0 = g.x(e.start), width = Math.max(3, g.x(e.end) - x0);
  return svgEl("rect", { x: x0.toFixed(1), y: y.toFixed(1), width: width.toFixed(1), height: Math.max(2, h - 1)
    .toFixed(1), fill: e.colour, class: "event " + e.kind, "data-start": String(e.start), "data-end": String(e.end) },
  e.text + " " + fmtSpan(e.start, e.end) + (e.detail ? " — " + e.detail : ""));
}

function draw() {
  const d = view.data;
  if (!d) return;
  const g = geometry();
  const svg = g.svg;
  svg.replaceChildren();
  svg.setAttribute("viewBox", "0 0 " + g.W + " " + g.H);
  svg.style.height = g.H + "px";
  const axis = svgEl("g", { class: "axis" });
  for (const tick of niceTicks(view.start, view.end, Math.max(2, Math.floor((g.W - g.left) / 90)))) {
    axis.append(svgEl("line", { x1: g.x(tick), x2: g.x(tick), y1: PAD, y2: g.H - AXIS_H + 3, class: "grid" }));
    const anchor = g.x(tick) < g.left + 20 ? "start" : (g.x(tick) > g.W - 24 ? "end" : "middle");
    const label = svgEl("text", { x: g.x(tick), y: g.H - 5, "text-anchor": anchor, class: "tick-time" });
    label.textContent = fmtTime(tick);
    axis.append(label);
  }
  for (const [key, r] of Object.entries(g.rows)) {
    const label = svgEl("text", { x: 2, y: r.y + Math.min(r.h, LANE_H) - 5, class: "lane-label", "data-lane": key });
    label.textContent = r.label;
    axis.append(label);
  }
  svg.append(axis);
  // stored video: what retention deleted (grey), the runs of frames (green), the gaps between them (red)
  const stored = g.rows.stored;
  if (d.expired_before > view.start) {
    svg.append(svgEl("rect", { x: g.x(view.start), y: stored.y, width: g.x(Math.min(d.expired_before, view.end)) -
      g.x(view.start), height: stored.h, fill: COLOURS.expired, class: "expired" },
    "frames before " + fmtTime(d.expired_before) + " expired (retention)"));
  }
  let previous = null;
  for (const [a, b] of d.coverage) {
    if (previous !== null && a > previous) {
      svg.append(svgEl("rect", { x: g.x(previous), y: stored.y, width: Math.max(2, g.x(a) - g.x(previous)),
        height: stored.h, fill: COLOURS.gap, class: "gap", "data-start": String(previous), "data-end": String(a) },
      "no frames " + fmtSpan(previous, a)));
    }
    svg.append(svgEl("rect", { x: g.x(a), y: stored.y, width: Math.max(2, g.x(b) - g.x(a)), height: stored.h,
      fill: COLOURS.stored, class: "coverage", "data-start": String(a), "data-end": String(b) },
    "frames stored " + fmtSpan(a, b)));
    previous = b;
  }
  if (g.rows.recorded) {
    for (const [a, b] of d.recordings) {
      svg.append(svgEl("rect", { x: g.x(a), y: g.rows.recorded.y, width: Math.max(2, g.x(b) - g.x(a)),
        height: g.rows.recorded.h, fill: COLOURS.recorded, class: "recording", "data-start": String(a),
        "data-end": String(b) }, "recorded " + fmtSpan(a, b)));
    }
  }
  if (!d.coverage.length) {
    const none = svgEl("text", { x: g.left + 4, y: stored.y + stored.h - 4, class: "empty" });
    none.textContent = "no frames stored";
    svg.append(none);
  }
  for (const e of view.events) {
    if (e.kind === "gap") continue;  // drawn with the coverage
    svg.append(bar(g, e.kind, e, e.kind === "object" ? OBJECT_ROWS : 0));
  }
  const cx = g.x(view.cursor);
  svg.append(svgEl("line", { x1: cx, x2: cx, y1: 1, y2: g.H - AXIS_H + 4, class: "cursor", id: "cursor" }));
}

// ------------------------------------------------------------------------------------------------ the cursor

function setCursor(t, fetchStill) {
  view.cursor = Math.min(view.end, Math.max(view.start, t));
  const track = $("#track");
  track.setAttribute("aria-valuenow", view.cursor.toFixed(1));
  track.setAttribute("aria-valuetext", fmtTime(view.cursor));
  $("#cursor-time").textContent = fmtTime(view.cursor);
  document.body.dataset.cursor = view.cursor.toFixed(3);
  const line = $("#cursor");
  if (line) {
    const g = geometry();
    line.setAttribute("x1", g.x(view.cursor));
    line.setAttribute("x2", g.x(view.cursor));
  }
  if (fetchStill) {
    clearTimeout(view.stillTimer);
    view.stillTimer = setTimeout(() => showStill(view.cursor), STILL_DELAY_MS);
  }
}

function eventAt(t) {
  // the shortest event that holds t (objects, alerts, text and answers; not gaps)
  let best = null;
  for (const e of view.events) {
    if (e.kind === "gap" || t < e.start - 0.25 || t > e.end + 0.25) continue;
    if (!best || e.end - e.start < best.end - best.start) best = e;
  }
  return best;
}

function step() {
  return Math.max(1, (view.end - view.start) / 100);
}

function jump(direction) {
  const starts = [...new Set(view.events.map((e) => e.start))].sort((a, b) => a - b);
  const next = direction > 0 ? starts.find((s) => s > view.cursor + 0.05)
    : starts.reverse().find((s) => s < view.cursor - 0.05);
  if (next !== undefined) setCursor(next, true);
}

$("#track").addEventListener("keydown", (event) => {
  hideHover();
  const keys = { ArrowRight: 1, ArrowLeft: -1, ArrowUp: 1, ArrowDown: -1 };
  if (event.key in keys) {
    event.preventDefault();
    if (event.shiftKey) jump(keys[event.key]); else setCursor(view.cursor + keys[event.key] * step(), true);
  } else if (event.key === "PageUp" || event.key === "PageDown") {
    event.preventDefault();
    setCursor(view.cursor + (event.key === "PageUp" ? 10 : -10) * step(), true);
  } else if (event.key === "Home" || event.key === "End") {
    event.preventDefault();
    setCursor(event.key === "Home" ? view.start : view.end, true);
  } else if (event.key === "Enter" || event.key === " ") {
    event.preventDefault();
    playAt(view.cursor);
  }
});

// ------------------------------------------------------------------------------------------------ frames

async function frameBlob(t, width) {
  const res = await api(streamPath("/frames?t=" + t.toFixed(3) + "&width=" + width));
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new Error(errorMessage(body, res.status));
  }
  return { blob: await res.blob(), shown: Number(res.headers.get("X-Lucy-Frame-Time")) };
}

async function showStill(t, note) {
  const seq = ++view.seq;
  const video = $("#player");
  try {
    const { blob, shown } = await frameBlob(t, 960);
    if (seq !== view.seq) return;
    video.pause();
    video.hidden = true;
    const img = $("#still");
    if (view.stillUrl) URL.revokeObjectURL(view.stillUrl);
    view.stillUrl = URL.createObjectURL(blob);
    img.src = view.stillUrl;
    img.dataset.time = String(shown);
    img.hidden = false;
    $("#player-empty").hidden = true;
    $("#player-note").textContent = note || ("frame at " + fmtTime(shown));
  } catch (err) {
    if (seq !== view.seq) return;
    $("#player-note").textContent = (note ? note + " · " : "") + "no frame: " + (err.message || err);
  }
}

// The frame under the pointer, in a small box above it (fetched once the pointer rests; kept per frame time).
function hoverAt(clientX) {
  const g = geometry();
  const box = g.svg.getBoundingClientRect();
  const px = (clientX - box.left) * g.W / box.width;
  if (px < g.left) { hideHover(); return; }
  const t = Math.min(view.end, Math.max(view.start, g.t(px)));
  const hover = $("#hover");
  hover.style.left = Math.min(Math.max(0, clientX - box.left - 80), box.width - 164) + "px";
  $("#hover-time").textContent = fmtTime(t);
  hover.hidden = false;
  view.hoverAt = t;
  clearTimeout(view.hoverTimer);
  view.hoverTimer = setTimeout(() => loadHover(t), HOVER_DELAY_MS);
}

async function loadHover(t) {
  const fps = (view.data && view.data.stored_fps) || 2;
  const key = Math.round(t * fps);  // one fetch per stored frame
  let url = view.thumbs.get(key);
  const img = $("#hover-img");
  try {
    if (!url) {
      url = URL.createObjectURL((await frameBlob(key / fps, 160)).blob);
      view.thumbs.set(key, url);
      if (view.thumbs.size > 200) {  // a bounded cache
        const [oldest, old] = view.thumbs.entries().next().value;
        URL.revokeObjectURL(old);
        view.thumbs.delete(oldest);
      }
    }
    if (view.hoverAt === t) { img.src = url; img.hidden = false; }
  } catch (err) {
    if (view.hoverAt === t) { img.hidden = true; $("#hover-time").textContent = fmtTime(t) + " · no frame"; }
  }
}

function hideHover() {
  clearTimeout(view.hoverTimer);
  view.hoverAt = null;
  $("#hover").hidden = true;
}

const svgBox = $("#review-timeline");
svgBox.addEventListener("pointermove", (event) => { if (event.pointerType === "mouse") hoverAt(event.clientX); });
svgBox.addEventListener("pointerleave", hideHover);
svgBox.addEventListener("click", (event) => {
  const g = geometry();
  const box = g.svg.getBoundingClientRect();
  const px = (event.clientX - box.left) * g.W / box.width;
  if (px < g.left) return;
  const target = event.target.closest ? event.target.closest("rect.event") : null;
  const t = g.t(px);
  setCursor(t, false);
  $("#track").focus({ preventScroll: true });
  if (target) playSpan(Number(target.dataset.start), Number(target.dataset.end), target.textContent);
  else playAt(t);
});

// ------------------------------------------------------------------------------------------------ playback

function playAt(t) {
  const e = eventAt(t);
  if (e) playSpan(e.start, e.end, e.text);
  else playSpan(t, t + CLIP_SECONDS, "");
}

// A clip of [from, to) (GET .../clip), fetched with the token and played from memory; without a clip (no such
// endpoint on this server, or nothing stored there) the still frame of its start, and why.
async function playSpan(from, to, what) {
  if (to - from < MIN_CLIP_SECONDS) {
    const mid = (from + to) / 2;
    from = mid - MIN_CLIP_SECONDS / 2;
    to = mid + MIN_CLIP_SECONDS / 2;
  }
  from = Math.max(view.start, from);
  to = Math.min(Math.max(from + 1, Math.min(to, from + MAX_CLIP_SECONDS)), Math.max(view.end, from + 1));
  setCursor(from, false);
  clearTimeout(view.stillTimer);  // a frame the cursor asked for before would replace the clip
  const seq = ++view.seq;
  const label = (what ? what + " · " : "") + fmtSpan(from, to);
  $("#player-note").textContent = "loading the clip of " + label + "…";
  const video = $("#player");
  try {
    const res = await api(view.data.clip_url + "?from=" + from.toFixed(3) + "&to=" + to.toFixed(3));
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      throw new Error(errorMessage(body, res.status));
    }
    const blob = await res.blob();
    if (seq !== view.seq) return;
    if (view.clipUrl) URL.revokeObjectURL(view.clipUrl);
    view.clipUrl = URL.createObjectURL(blob);
    video.dataset.from = String(from);
    video.dataset.to = String(to);
    delete video.dataset.duration;
    video.src = view.clipUrl;
    video.hidden = false;
    $("#still").hidden = true;
    $("#player-empty").hidden = true;
    $("#player-note").textContent = "clip " + label;
    video.play().catch(() => {});  // a browser that refuses autoplay shows the controls
  } catch (err) {
    if (seq !== view.seq) return;
    showStill(from, "no clip (" + (err.message || err) + "): the frame at " + fmtTime(from));
  }
}

$("#player").addEventListener("loadedmetadata", () => {
  const video = $("#player");
  video.dataset.duration = String(video.duration);
});

// ------------------------------------------------------------------------------------------------ the list

function renderEvents() {
  const list = $("#events");
  const shown = view.events.slice(0, EVENTS_SHOWN);
  list.replaceChildren(...shown.map((e) => {
    const li = el("li", { class: "event " + e.kind, "data-kind": e.kind, "data-start": String(e.start) });
    const button = el("button", { type: "button", class: "when link", title: "play " + fmtSpan(e.start, e.end) },
                      fmtSpan(e.start, e.end));
    button.addEventListener("click", () => playSpan(e.start, e.end, e.text));
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = e.colour;
    const body = el("span", { class: "body" });
    body.append(el("span", { class: "badge kind" }, e.kind), el("span", { class: "text" }, e.text));
    if (e.detail) body.append(el("span", { class: "detail muted" }, e.detail));
    li.append(swatch, button, body);
    if (e.kind === "object" && e.item.snapshot_url) li.prepend(snapshot(e.item));
    return li;
  }));
  const counts = ["object", "alert", "text", "answer", "gap"].map((k) => [k, view.events.filter((e) => e.kind === k)
    .length]).filter(([, n]) => n).map(([k, n]) => n + " " + (k === "answer" ? "evidence" : k + (n === 1 ? "" : "s")));
  $("#events-note").textContent = (counts.join(" · ") || "none yet") +
    (view.events.length > EVENTS_SHOWN ? " (the first " + EVENTS_SHOWN + " listed)" : "");
}

const snapshots = new Map();

function snapshot(o) {
  const img = el("img", { class: "snap", alt: "snapshot of " + o.label });
  const url = snapshots.get(o.id);
  if (url) { img.src = url; return img; }
  api(o.snapshot_url).then((res) => (res.ok ? res.blob() : Promise.reject(new Error("HTTP " + res.status))))
    .then((blob) => { const u = URL.createObjectURL(blob); snapshots.set(o.id, u); img.src = u; })
    .catch(() => img.remove());
  return img;
}

// ------------------------------------------------------------------------------------------------ loading

async function load() {
  try {
    const res = await api(streamPath("/timeline"));
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(errorMessage(body, res.status));
    const first = view.data === null;
    view.data = body;
    view.start = Math.min(body.first === null ? 0 : Math.max(0, body.first), body.to);
    view.end = Math.max(view.start + 1, body.to);
    view.events = buildEvents(body);
    $("#track").setAttribute("aria-valuemin", view.start.toFixed(1));
    $("#track").setAttribute("aria-valuemax", view.end.toFixed(1));
    $("#span-note").textContent = fmtSpan(view.start, body.to) + (body.live ? " · live source" : "") +
      (body.frames ? " · " + body.frames + " frames" : "");
    const runs = body.coverage.length;
    const recorded = body.recordings.length ? " · " + fmtTime(body.recordings.reduce((n, [a, b]) => n + b - a, 0)) +
      " recorded" : "";
    $("#summary").textContent = (runs ? (runs === 1 ? "frames stored all along" : runs + " stretches of frames, " +
      (runs - 1) + (runs === 2 ? " gap" : " gaps")) : "no frames stored") + recorded;
    $("#load-status").hidden = true;
    renderEvents();
    draw();
    setCursor(first ? view.start : view.cursor, first);
    document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
  } catch (err) {
    $("#load-status").textContent = "Not loaded: " + (err.message || err);
    $("#load-status").hidden = false;
  }
}

$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  view.token = $("#token-input").value.trim();
  sessionStorage.setItem("lucyToken", view.token);
  $("#token-box").hidden = true;
  load();
});

$("#stream-title").textContent = name;
document.title = "Lucy — review " + name;
window.addEventListener("resize", draw);
setInterval(() => { if (!document.hidden) load(); }, RELOAD_MS);
load();
