/*
 * queue.js - the queue (pending, held, running and stopping jobs the token
 * may see, with filters, reason, explanation, queue position and estimated
 * start) and the job page (spec, placement, events with their typed data,
 * logs with a live tail while the rank runs).
 *
 * Position and start come from the job JSON (queue_position,
 * estimated_start) when the controller gives them, "-" otherwise.
 */
"use strict";

const STATE_ORDER = {running: 0, stopping: 1, pending: 2, held: 3};
const LOG_TAIL_BYTES = 16384;
const QUEUE_LONG = 2000, QUEUE_LONG_POLL_MS = 15000;

/* The table's short forms: "1 / 3" (in its tenant / in the cluster), and the
 * start as a relative time or "unknown" (the reason is the cell's title). */
function positionShort(j) {
  const p = j.queue_position;
  if (p && typeof p === "object" && typeof p.tenant === "number") {
    return p.tenant + (typeof p.cluster === "number" ? " / " + p.cluster : "");
  }
  return typeof p === "number" ? String(p) : "-";
}

function startShort(j) {
  const e = j.estimated_start;
  const t = typeof e === "number" ? e : e && typeof e === "object" ? (typeof e.time === "number" ? e.time : e.at) : null;
  if (typeof t === "number") return ago(t);
  return e ? "unknown" : "-";
}

/* A running job whose image (or data) is still coming to a node
 * (image_pull in the job JSON, docs/images.md): "image 40% (12 of 30 MiB) to
 * rank 0"; "" otherwise. */
function pullText(j) {
  const p = j.image_pull;
  if (!p || typeof p !== "object") return "";
  const mib = b => (b / 1048576).toFixed(b < 10485760 ? 1 : 0);
  const pct = p.total_bytes > 0 ? Math.floor(100 * p.done_bytes / p.total_bytes) + "% (" : "(";
  return "image " + pct + mib(p.done_bytes || 0) + " of " + (p.total_bytes > 0 ? mib(p.total_bytes) : "?") +
    " MiB) to rank " + p.rank;
}

function jobRow(j) {
  return '<tr data-job="' + j.id + '"><td class="num"><a href="#/job/' + j.id + '">' + j.id + "</a></td><td>" +
    esc(j.name) + "</td><td>" + swatch(j.tenant) + "</td><td>" + esc(j.owner) + '</td><td><span class="state s-' +
    esc(j.state) + '">' + esc(j.state) + "</span></td><td>" + esc(j.tier) + '</td><td class="num">' + esc(gpusCell(j)) +
    "</td><td>" + esc(positionShort(j)) + '</td><td title="' + esc(j.state === "pending" ? startCell(j) : "") + '">' +
    esc(j.state === "pending" ? startShort(j) : j.start_time ? "started " + ago(j.start_time) : "-") +
    "</td><td>" + esc(ago(j.submit_time)) + '</td><td class="reason"><b>' + esc(j.reason || "") + "</b> " +
    '<span class="muted">' + esc([pullText(j), j.why || ""].filter(Boolean).join("; ")) + "</span></td></tr>";
}

VIEWS.queue = async function (main, v) {
  const st = v.state;
  if (!st.built) {
    main.innerHTML = '<div class="toolbar"><input id="q-text" type="search" placeholder="filter: name, owner, id, reason" aria-label="filter">' +
      '<select id="q-state" aria-label="state"><option value="">every state</option><option>pending</option><option>held</option>' +
      '<option>running</option><option>stopping</option></select><select id="q-tenant" aria-label="tenant"><option value="">every tenant</option></select>' +
      '<span id="q-count" class="muted"></span></div><table class="grid" id="q-table"><thead><tr><th class="num">ID</th><th>NAME</th><th>TENANT</th><th>OWNER</th>' +
      '<th>STATE</th><th>TIER</th><th class="num">GPUS</th><th title="in its tenant / in the cluster">POSITION</th><th>EST. START</th><th>SUBMITTED</th><th>REASON</th></tr></thead><tbody></tbody></table>';
    for (const id of ["q-text", "q-state", "q-tenant"]) $(id).addEventListener("input", () => draw());
    st.built = true;
  }
  const jobs = await activeJobs();
  st.jobs = jobs;
  /* every active job is read on each poll: a long queue is read less often */
  v.pollMs = jobs.length > QUEUE_LONG ? QUEUE_LONG_POLL_MS : POLL_MS;
  const tenants = [...new Set(jobs.map(j => j.tenant))].sort();
  const sel = $("q-tenant");
  const cur = sel.value;
  sel.innerHTML = '<option value="">every tenant</option>' + tenants.map(t => "<option>" + esc(t) + "</option>").join("");
  sel.value = tenants.includes(cur) ? cur : "";
  function draw() {
    const text = $("q-text").value.trim().toLowerCase();
    const state = $("q-state").value, tenant = $("q-tenant").value;
    const rows = st.jobs.filter(j => (!state || j.state === state) && (!tenant || j.tenant === tenant) &&
      (!text || [j.id, j.name, j.owner, j.reason, j.why].some(x => String(x || "").toLowerCase().includes(text))));
    rows.sort((a, b) => (STATE_ORDER[a.state] - STATE_ORDER[b.state]) ||
      ((a.queue_position && typeof a.queue_position === "number" ? a.queue_position : 1e9) -
       (b.queue_position && typeof b.queue_position === "number" ? b.queue_position : 1e9)) ||
      (a.submit_time - b.submit_time) || (a.id - b.id));
    const shown = rows.slice(0, 2000);
    document.querySelector("#q-table tbody").innerHTML = shown.map(jobRow).join("") ||
      '<tr><td colspan="11" class="muted">no active jobs</td></tr>';
    $("q-count").textContent = rows.length + " of " + st.jobs.length + " active jobs" +
      (rows.length > shown.length ? " (first " + shown.length + " shown)" : "");
    paintSwatches(main);
  }
  draw();
};

/* ---- the job page ---- */

/* An event's detail in words from its typed data (times local, durations,
 * tier names); the stored detail when data says nothing. */
function eventText(ev) {
  const d = ev.data || {};
  switch (ev.kind) {
    case "run-ended":
      if (typeof d.start === "number") {
        return "ran " + duration(d.end - d.start) + " (" + isoTime(d.start) + " \u2192 " + isoTime(d.end) + ") on " +
          d.gpus + "\u00d7" + (d.model || "GPU") + ", " + (d.tier || "") + "; " +
          (d.gpus * (d.end - d.start) / 3600).toFixed(2) + " GPU-hours";
      }
      break;
    case "reserved":
      if (typeof d.start_by === "number") return "holds the reservation: starts by " + isoTime(d.start_by) + " (in " + duration(d.in_s) + ")";
      break;
    case "started":
      if (d.node) return "on " + d.node + (d.more_nodes ? " and other nodes" : "");
      break;
    case "preempted":
      if (d.for_job) return "for job " + d.for_job + " (" + d.for_tenant + ", " + (d.tier ? d.tier + ", " : "") +
        (d.cause === "time-sharing" ? "time-sharing" : "reclaim") + "); signal " + d.signal +
        ", grace " + duration(d.grace_s) + ", " + (d.lost_gpu_s / 3600).toFixed(2) + " GPU-hours since the last checkpoint";
      break;
    case "requeued":
      if (d.outcome) return "every rank stopped (" + d.outcome + ")" + (typeof d.eligible_at === "number" ? "; eligible again " + isoTime(d.eligible_at) : "");
      break;
    default:
      break;
  }
  return ev.detail || "";
}

function placementTable(job) {
  const p = job.placement || [];
  if (!p.length) return '<p class="muted">not placed</p>';
  const nodes = nameRanges(p.map(x => x.node));
  return '<p>' + p.length + " rank" + (p.length === 1 ? "" : "s") + " on <b>" + esc(nodes) + "</b></p>" +
    '<table class="grid small"><thead><tr><th class="num">RANK</th><th>NODE</th><th>GPUS</th><th>SHARE</th></tr></thead><tbody>' +
    p.map((x, i) => '<tr><td class="num">' + i + "</td><td>" + esc(x.node) + "</td><td>" + esc((x.gpus || []).join(",")) +
      "</td><td>" + esc(x.mig_profile ? "MIG " + x.mig_profile + " @" + x.mig_start :
        x.gpu_milli && x.gpu_milli < 1000 ? (x.gpu_milli / 1000) + " GPU" : "whole") + "</td></tr>").join("") +
    "</tbody></table>";
}

/* An ended job's exit (docs/api.md "Job"): its exit code, "signal N", or "-". */
function exitCell(j) {
  if (Number.isInteger(j.exit_code)) return String(j.exit_code);
  if (Number.isInteger(j.signal)) return "signal " + j.signal;
  return "-";
}

/* How each rank ended: node, end, exit code or signal, and the reason line. */
function ranksTable(job) {
  const r = job.ranks || [];
  if (!r.length) return "";
  return '<h2>How it ended</h2><p><b>' + esc(job.reason || job.state) + "</b> " + esc(job.why || "") + "</p>" +
    '<table class="grid small" id="j-ranks"><thead><tr><th class="num">RANK</th><th>NODE</th><th>END</th><th class="num">EXIT</th>' +
    "<th>REASON</th></tr></thead><tbody>" +
    r.map((x, i) => x ? '<tr><td class="num">' + esc(x.rank) + "</td><td>" + esc(x.node) + '</td><td><span class="end e-' +
      esc(x.end) + '">' + esc(x.end) + '</span></td><td class="num">' + esc(exitCell(x)) + "</td><td>" + esc(x.reason) +
      "</td></tr>" : '<tr><td class="num">' + i + '</td><td colspan="4" class="muted">stopped with the gang</td></tr>').join("") +
    "</tbody></table>";
}

async function loadLogs(v, id) {
  const rank = $("log-rank").value, stream = $("log-stream").value;
  const out = $("log-out");
  try {
    const doc = await api("/v1/jobs/" + id + "/logs?rank=" + encodeURIComponent(rank) + "&stream=" + stream +
                          "&tail=" + LOG_TAIL_BYTES);
    const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    out.textContent = doc.data || "(empty)";
    if (atEnd) out.scrollTop = out.scrollHeight;
    $("log-live").textContent = doc.live ? "live tail" : "ended (last output kept)";
    $("log-live").className = doc.live ? "badge ok" : "badge";
  } catch (e) {
    out.textContent = e.message;
    $("log-live").textContent = "";
  }
}

VIEWS.job = async function (main, v) {
  const id = Number(v.arg);
  const st = v.state;
  v.pollMs = 2000;
  const [jd, ed, xd] = await Promise.all([api("/v1/jobs/" + id), apiAll("/v1/jobs/" + id + "/events", "events"),
                                         api("/v1/jobs/" + id + "/explain")]);
  const j = jd.job;
  if (!st.built) {
    main.innerHTML = '<p><a href="#/queue">\u2190 queue</a></p><h1 id="j-title"></h1><div class="cols"><div class="card" id="j-facts"></div>' +
      '<div class="card" id="j-place"></div></div><div class="card"><h2>Events</h2><table class="grid small" id="j-events"><thead><tr><th>TIME</th>' +
      '<th>KIND</th><th>WHAT</th></tr></thead><tbody></tbody></table></div><div class="card"><h2>Logs <span id="log-live" class="badge"></span></h2>' +
      '<div class="toolbar">rank <select id="log-rank"></select> <select id="log-stream"><option>stdout</option><option>stderr</option></select></div>' +
      '<pre id="log-out" class="log">\u2026</pre></div><div class="card"><h2>Spec</h2><pre id="j-spec" class="spec"></pre></div>';
    const ranks = Math.max((j.placement || []).length,
                           (j.spec && j.spec.tasks ? j.spec.tasks.reduce((a, t) => a + (t.count || 1), 0) : 1), 1);
    $("log-rank").innerHTML = Array.from({length: Math.min(ranks, 256)}, (_, i) => "<option>" + i + "</option>").join("");
    for (const el of ["log-rank", "log-stream"]) $(el).addEventListener("change", () => loadLogs(v, id));
    st.built = true;
  }
  $("j-title").textContent = "Job " + j.id + " \u00b7 " + j.name;
  $("j-facts").innerHTML = '<h2>State</h2><dl class="kv">' +
    "<dt>state</dt><dd><span class=\"state s-" + esc(j.state) + '">' + esc(j.state) + "</span></dd>" +
    "<dt>tenant</dt><dd>" + swatch(j.tenant) + "</dd><dt>owner</dt><dd>" + esc(j.owner) + "</dd>" +
    "<dt>tier</dt><dd>" + esc(j.tier) + "</dd><dt>GPUs</dt><dd>" + esc(gpusCell(j)) + "</dd>" +
    (j.spec && j.spec.image ? '<dt>image</dt><dd id="j-image">' + esc(j.spec.image) +
      (j.image_pull ? '<br><span class="muted">' + esc(pullText(j)) + "</span>" : "") + "</dd>" : "") +
    (j.spec && Array.isArray(j.spec.data) ? '<dt>data</dt><dd id="j-data">' +
      j.spec.data.map(d => esc(d.path) + " \u2190 " + esc(d.ref)).join("<br>") + "</dd>" : "") +
    "<dt>submitted</dt><dd>" + esc(isoTime(j.submit_time)) + "</dd><dt>started</dt><dd>" + esc(isoTime(j.start_time)) + "</dd>" +
    "<dt>ended</dt><dd>" + esc(isoTime(j.end_time)) + "</dd><dt>exit code</dt><dd id=\"j-exit\">" + esc(exitCell(j)) + "</dd>" +
    "<dt>preemptions</dt><dd>" + esc(j.preemptions) + "</dd>" +
    /* how to reach a running job from a laptop, through the controller (docs/interactive.md) */
    (j.state === "running" ? '<dt>reach</dt><dd id="j-reach"><code>' +
      esc(j.spec && j.spec.interactive ? "tessera attach " + j.id : "tessera exec " + j.id + " -- bash") +
      "</code><br><code>" + esc("tessera port-forward " + j.id + " 8888:8888") + "</code></dd>" : "") +
    "<dt>position</dt><dd>" + esc(positionCell(Object.assign({}, j, xd))) + "</dd><dt>estimated start</dt><dd>" +
    esc(startCell(Object.assign({}, j, xd))) + "</dd>" +
    (j.standing ? "<dt>standing</dt><dd>" + esc(j.standing) + "</dd>" : "") + "<dt>reason</dt><dd><b>" + esc(xd.reason || "-") + "</b></dd>" +
    "<dt>explanation</dt><dd>" + esc(xd.explanation || "-") + "</dd>" +
    (xd.reserved_at ? "<dt>reserved to start</dt><dd>" + esc(isoTime(xd.reserved_at)) + "</dd>" : "") +
    /* content withheld from this token (docs/secrets.md): the owner's and admins' */
    (j.hidden ? '<dt>hidden</dt><dd class="hidden-fields">' + esc(j.hidden.join(", ")) + "</dd>" : "") + "</dl>";
  $("j-place").innerHTML = "<h2>Placement</h2>" + placementTable(j) + ranksTable(j);
  document.querySelector("#j-events tbody").innerHTML = ed.filter(e => e.kind !== "output").map(e =>
    "<tr><td>" + esc(isoTime(e.time)) + '</td><td><span class="kind k-' + esc(e.kind) + '">' + esc(e.kind) + "</span></td><td>" +
    esc(eventText(e)) + "</td></tr>").join("");
  $("j-spec").textContent = JSON.stringify(j.spec, null, 2);
  paintSwatches(main);
  if (j.hidden && j.hidden.includes("logs")) $("log-out").textContent = "hidden (the job's owner and admins read its output)";
  else if (j.start_time || ed.some(e => e.kind === "started")) await loadLogs(v, id);
  else $("log-out").textContent = "no output: the job has not run"; /* nothing to ask for */
};
