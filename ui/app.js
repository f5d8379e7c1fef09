/*
 * app.js - the console's core: sign-in, the API client, the router and the
 * helpers every view shares (docs/console.md).
 *
 * The token lives in sessionStorage (this tab only, gone when it closes) and
 * goes with every request as "Authorization: Bearer"; the console has no
 * other access to tesserad than that token, so each view shows what the API
 * answers that token and nothing more. Views are functions registered in
 * VIEWS; the hash (#/map, #/queue, #/job/42, ...) picks one, and the view
 * polls the API while it is shown and the tab is visible (POLL_MS, stretched
 * to 10 times the last load's own time when the cluster is large).
 * Everything shown is text through esc() or textContent: no API string
 * becomes markup.
 */
"use strict";

const TOKEN_KEY = "tessera.token";
const POLL_MS = 5000;
const PAGE_LIMIT = 1000;
const VIEWS = {};
const T = {view: null, timer: 0, gen: 0, me: null, palette: new Map()};

function $(id) { return document.getElementById(id); }

function esc(s) {
  return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g, c => (
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

class ApiError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

async function api(path, opts) {
  const o = opts || {};
  const headers = {"Authorization": "Bearer " + sessionStorage.getItem(TOKEN_KEY)};
  if (o.body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {method: o.method || "GET", headers,
                               body: o.body === undefined ? undefined : JSON.stringify(o.body)});
  let doc = null;
  try { doc = await r.json(); } catch (e) { doc = null; }
  if (r.status === 401 && !o.probe) {
    signOut(doc && doc.error ? doc.error.message : "The token is unknown or revoked.");
  }
  if (!r.ok) {
    throw new ApiError(r.status, doc && doc.error ? doc.error.message : "HTTP " + r.status);
  }
  return doc;
}

/* Every page of a list ("jobs"), following next_cursor. */
async function apiAll(path, key) {
  const out = [];
  let cursor = null;
  for (let i = 0; i < 1000; i++) {
    const sep = path.includes("?") ? "&" : "?";
    const doc = await api(path + sep + "limit=" + PAGE_LIMIT +
                          (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    out.push(...doc[key]);
    cursor = doc.next_cursor;
    if (!cursor) break;
  }
  return out;
}

/* Active jobs the token may see: pending, held, running and stopping. */
async function activeJobs() {
  const states = ["running", "stopping", "pending", "held"];
  const lists = await Promise.all(states.map(s => apiAll("/v1/jobs?state=" + s, "jobs")));
  return [].concat(...lists);
}

/* ---- formatting ---- */

function pad(n) { return String(n).padStart(2, "0"); }

/* Local ISO 8601 time, seconds precision, with the offset. */
function isoTime(t) {
  if (typeof t !== "number") return "-";
  const d = new Date(t * 1000);
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? "+" : "-";
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + sign +
    pad(Math.floor(Math.abs(off) / 60)) + ":" + pad(Math.abs(off) % 60);
}

function duration(s) {
  if (typeof s !== "number" || !isFinite(s)) return "-";
  const a = Math.abs(s);
  if (a < 60) return a.toFixed(a < 10 ? 1 : 0) + " s";
  if (a < 3600) return Math.floor(a / 60) + " min " + Math.round(a % 60) + " s";
  if (a < 86400) return Math.floor(a / 3600) + " h " + Math.round((a % 3600) / 60) + " min";
  return Math.floor(a / 86400) + " d " + Math.round((a % 86400) / 3600) + " h";
}

function ago(t) {
  if (typeof t !== "number") return "-";
  const d = Date.now() / 1000 - t;
  return d >= 0 ? duration(d) + " ago" : "in " + duration(-d);
}

/* One form for every job, the server's gpus_text, which the CLI prints too:
 * "8×H100-80GB", "16×any" (no model asked for yet), "4×0.25 H100-80GB
 * (1 GPU)" for shares, "2×1g.10gb" for MIG; built here from an older server. */
function gpusCell(job) {
  if (typeof job.gpus_text === "string") return job.gpus_text;
  const tasks = (job.spec && job.spec.tasks) || [];
  const model = job.gpu_model || "any";
  if (tasks.length && tasks.every(t => t.mig_profile)) {
    return tasks.reduce((a, t) => a + t.count, 0) + "\u00d7" + tasks[0].mig_profile;
  }
  if (tasks.length && tasks.every(t => t.gpu_fraction)) {
    return +tasks.reduce((a, t) => a + t.count * t.gpu_fraction, 0).toFixed(3) + "\u00d7" + model;
  }
  return job.gpus + "\u00d7" + model;
}

/* ["r1-n1","r1-n2","r1-n3","r2-n1"] -> "r1-n[1-3],r2-n1": consecutive numbers
 * at the end of names with one prefix fold into a range (widths kept). */
function nameRanges(names) {
  const groups = new Map();
  const plain = [];
  for (const n of [...new Set(names)]) {
    const m = /^(.*?)(\d+)$/.exec(n);
    if (!m) { plain.push(n); continue; }
    const key = m[1] + "\u0000" + (m[2].startsWith("0") ? m[2].length : 0);
    if (!groups.has(key)) groups.set(key, {prefix: m[1], nums: []});
    groups.get(key).nums.push(m[2]);
  }
  const out = [];
  for (const g of groups.values()) {
    g.nums.sort((a, b) => Number(a) - Number(b));
    const parts = [];
    for (let i = 0; i < g.nums.length; i++) {
      let j = i;
      while (j + 1 < g.nums.length && Number(g.nums[j + 1]) === Number(g.nums[j]) + 1) j++;
      parts.push(i === j ? g.nums[i] : g.nums[i] + "-" + g.nums[j]);
      i = j;
    }
    out.push(g.nums.length === 1 ? g.prefix + parts[0] : g.prefix + "[" + parts.join(",") + "]");
  }
  return out.concat(plain.sort()).join(",");
}

/* A stable colour per tenant: the tenants' sorted order picks from a palette
 * chosen to stay apart for up to 12 tenants, then it wraps. */
const PALETTE = ["#4f8cff", "#36c28f", "#f2a33a", "#9b6bff", "#e4577a", "#2bb5c9",
                 "#b8c23a", "#ff7f50", "#6f7dff", "#3aa36a", "#d46fd0", "#a47c48"];

function setTenants(names) {
  T.palette = new Map();
  [...names].sort().forEach((n, i) => T.palette.set(n, PALETTE[i % PALETTE.length]));
}

function tenantColour(name) {
  if (!T.palette.has(name)) T.palette.set(name, PALETTE[T.palette.size % PALETTE.length]);
  return T.palette.get(name);
}

function swatch(name) {
  return '<span class="swatch" data-colour="' + esc(tenantColour(name)) + '"></span>' + esc(name);
}

/* Colours set through the DOM (the policy allows no style attributes). */
function paintSwatches(root) {
  for (const el of root.querySelectorAll("[data-colour]")) el.style.background = el.dataset.colour;
  for (const el of root.querySelectorAll("[data-width]")) el.style.width = el.dataset.width;
}

/* queue_position: a number, or {tenant, cluster}; "-" when absent. */
function positionCell(job) {
  const p = job.queue_position;
  if (typeof p === "number") return "#" + p;
  if (p && typeof p === "object") {
    const parts = [];
    if (typeof p.tenant === "number") parts.push("#" + p.tenant + " in tenant");
    if (typeof p.cluster === "number") parts.push("#" + p.cluster + " in cluster");
    return parts.length ? parts.join(", ") : "-";
  }
  return "-";
}

/* estimated_start: a time, a string ("unknown"), or {time|at, reason}. */
function startCell(job) {
  const e = job.estimated_start;
  if (typeof e === "number") return isoTime(e) + " (" + ago(e) + ")";
  if (typeof e === "string") return e;
  if (e && typeof e === "object") {
    const t = typeof e.time === "number" ? e.time : e.at;
    if (typeof t === "number") return isoTime(t) + " (" + ago(t) + ")";
    if (e.reason) return "unknown: " + e.reason;
  }
  return "-";
}

/* ---- tooltip ---- */

function tipShow(ev, html) {
  const tip = $("tip");
  tip.innerHTML = html;
  tip.hidden = false;
  const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  const y = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
  tip.style.left = x + "px";
  tip.style.top = y + "px";
}

function tipHide() { $("tip").hidden = true; }

/* ---- who is signed in ---- */

/* Who the pasted token (or OpenID Connect ID token) is: GET /v1/whoami.
 * Used for what the page offers (drain buttons); the API decides what is
 * allowed. */
async function whoAmI() {
  const me = await api("/v1/whoami");
  return {role: me.role, tenant: me.tenant, name: me.name};
}

function signOut(msg) {
  sessionStorage.removeItem(TOKEN_KEY);
  clearTimeout(T.timer);
  T.gen++;
  T.me = null;
  $("main").hidden = true;
  $("signout").hidden = true;
  $("who").textContent = "";
  $("signin").hidden = false;
  $("signin-error").hidden = !msg;
  $("signin-error").textContent = msg || "";
  $("token").value = "";
  $("token").focus();
}

async function signIn(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    await api("/v1/tenants", {probe: true});
  } catch (e) {
    sessionStorage.removeItem(TOKEN_KEY);
    signOut(e.status === 401 ? "The token is unknown or revoked." : e.message);
    return;
  }
  /* a failed whoami (a busy controller) shows the least the token may do,
   * and is asked again at the next route until it answers */
  try { T.me = await whoAmI(); } catch (e) { T.me = {role: "user", tenant: null, unknown: true}; }
  $("who").textContent = T.me.role + (T.me.tenant ? " \u00b7 " + T.me.tenant : "");
  $("signin").hidden = true;
  $("main").hidden = false;
  $("signout").hidden = false;
  route();
}

/* ---- router and polling ---- */

function route() {
  const tok = sessionStorage.getItem(TOKEN_KEY);
  if (!tok) { signOut(); return; }
  if (!T.me) { signIn(tok); return; } /* a token put there by another page of this tab */
  const parts = (location.hash || "#/map").slice(2).split("/");
  const name = VIEWS[parts[0]] ? parts[0] : "map";
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === (name === "job" ? "queue" : name));
  }
  clearTimeout(T.timer);
  const gen = ++T.gen;
  $("main").className = "view-" + name;
  /* each route draws into its own element: a view of an earlier route whose
   * request comes back late draws into its own, no longer shown, and never
   * over this one (it did: a map drawn after a switch to the nodes view
   * replaced the nodes table, and the nodes view then failed on every poll) */
  const main = document.createElement("div");
  $("main").replaceChildren(main);
  T.view = {name, arg: parts.slice(1).join("/"), state: {}};
  const tick = async () => {
    if (gen !== T.gen) return;
    const t0 = performance.now();
    if (!document.hidden) {
      if (T.me && T.me.unknown) { /* whoami failed at sign-in: asked again */
        try {
          const me = await whoAmI();
          if (gen !== T.gen) return;
          T.me = me;
          $("who").textContent = me.role + (me.tenant ? " \u00b7 " + me.tenant : "");
        } catch (e) { /* the next tick asks again */ }
      }
      try {
        await VIEWS[name](main, T.view);
        $("status").textContent = "updated " + new Date().toLocaleTimeString();
        $("status").classList.remove("error");
      } catch (e) {
        if (gen !== T.gen) return;
        $("status").textContent = e.message;
        $("status").classList.add("error");
      }
    }
    if (gen !== T.gen) return;
    const took = performance.now() - t0;
    T.timer = setTimeout(tick, Math.max(T.view.pollMs || POLL_MS, 10 * took));
  };
  tick();
}

/* A view asks for a redraw now (after an action). */
function refresh() { route(); }

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => { if (!document.hidden && T.me) route(); });
document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", ev => {
    ev.preventDefault();
    const tok = $("token").value.trim();
    if (tok) signIn(tok);
  });
  $("signout").addEventListener("click", () => signOut());
  const tok = sessionStorage.getItem(TOKEN_KEY);
  if (tok) signIn(tok); else signOut();
});
