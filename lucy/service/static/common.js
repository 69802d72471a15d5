// Helpers the dashboard and the review page share (loaded before either page's script): time formats and safe
// element building. Plain JS, no build step; text goes in with textContent only, never as HTML.
"use strict";

function errorMessage(body, status) {
  if (body && body.error && body.error.message) return body.error.message;
  if (body && typeof body.detail === "string") return body.detail;
  if (body && body.detail) return JSON.stringify(body.detail);
  return "HTTP " + status;
}

// Every time on a page, media times and durations alike, as Lucy's command line prints them: h:mm:ss (m:ss under
// an hour), with tenths when not whole.
function fmtTime(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  const tenths = Math.round(Math.abs(s) * 10);
  const whole = Math.floor(tenths / 10), frac = tenths % 10;
  const h = Math.floor(whole / 3600), m = Math.floor((whole % 3600) / 60), sec = whole % 60;
  const text = (h ? h + ":" + String(m).padStart(2, "0") : String(m)) + ":" + String(sec).padStart(2, "0") +
    (frac ? "." + frac : "");
  return (s < 0 ? "−" : "") + text;
}

function fmtSpan(start, end) {
  return fmtTime(start) + "–" + fmtTime(end);
}

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
