/*
 * map.js - the cluster map: topology groups (spine, leaf, rack, NVLink
 * domain: whatever levels the cluster file names) -> nodes -> GPUs, each GPU
 * drawn in SVG with its MIG instances or fractional shares, coloured by the
 * tenant of the job on it. A GPU in use by a job the token may not see is
 * drawn grey ("another tenant"): the map knows it is used (the node's
 * gpu_devices) but never whose. Drained and unhealthy nodes carry their
 * reason; the fragmentation figure is the share of free GPUs that sit on
 * nodes already partly used (the same figure as
 * tessera_gpu_fragmentation_ratio in /metrics).
 */
"use strict";

const GPU_W = 20, GPU_H = 32, GPU_GAP = 3, GPU_COLS = 8, MIG_SLICES = 7;
const FREE = "#e9edf3", HIDDEN = "#9aa3ae", DOWN = "#f3d6d6";

/* "3g.40gb" -> 3 (of 7 compute slices); unknown shapes take one slice. */
function migSlices(profile) {
  const m = /^(\d+)g\./.exec(profile || "");
  return m ? Math.min(Number(m[1]), MIG_SLICES) : 1;
}

/* node name -> gpu index -> [{job, tenant, milli, mig_start}] from placements. */
function gpuHolders(jobs) {
  const by = new Map();
  for (const j of jobs) {
    for (const p of j.placement || []) {
      if (!by.has(p.node)) by.set(p.node, new Map());
      const gm = by.get(p.node);
      for (const g of p.gpus || []) {
        if (!gm.has(g)) gm.set(g, []);
        gm.get(g).push({job: j.id, tenant: j.tenant, name: j.name,
                        milli: typeof p.gpu_milli === "number" && p.gpu_milli > 0 ? p.gpu_milli : 1000,
                        mig_profile: p.mig_profile, mig_start: p.mig_start});
      }
    }
  }
  return by;
}

function rect(x, y, w, h, fill, attrs) {
  return '<rect x="' + x.toFixed(1) + '" y="' + y + '" width="' + Math.max(w, 0.5).toFixed(1) +
    '" height="' + h + '" fill="' + fill + '"' + (attrs || "") + "/>";
}

/* How much of a GPU is held, in milli-GPU: a whole GPU with a task on it
 * counts whole, a shared one by what its shares add up to. */
function usedMilli(dev) {
  return dev.mode === "whole" && dev.tasks > 0 ? 1000 : Math.min(dev.used_milli || 0, 1000);
}

/* One GPU's cell: whole, shared (shares side by side) or MIG (instances on
 * their slices). */
function gpuSvg(node, ni, g, x, y, holders, down) {
  const dev = (node.gpu_devices || [])[g] || {mode: "whole", used_milli: 0, tasks: 0};
  const hs = holders.get(g) || [];
  const at = ' data-n="' + ni + '" data-g="' + g + '"';
  let s = rect(x, y, GPU_W, GPU_H, down ? DOWN : FREE, ' class="gpu" rx="2"' + at);
  if (dev.mode === "mig") {
    const mig = (node.mig || []).find(m => m.gpu === g);
    const sw = GPU_H / MIG_SLICES;
    for (const inst of (mig ? mig.instances : [])) {
      const h = hs.find(k => k.mig_start === inst.start);
      const fill = h ? tenantColour(h.tenant) : inst.used ? HIDDEN : "#d5dce6";
      s += rect(x + 1, y + inst.start * sw + 0.5, GPU_W - 2, migSlices(inst.profile) * sw - 1,
                fill, ' class="slice"' + at + (h ? ' data-j="' + h.job + '"' : ""));
    }
    return s;
  }
  let off = 0, seen = 0;
  for (const h of hs) {
    const w = GPU_W * Math.min(h.milli, 1000) / 1000;
    s += rect(x + off, y, w, GPU_H, tenantColour(h.tenant),
              ' class="share"' + at + ' data-j="' + h.job + '"');
    off += w;
    seen += Math.min(h.milli, 1000);
  }
  const used = usedMilli(dev);
  if (used > seen) /* held by jobs this token does not see */
    s += rect(x + off, y, GPU_W * (used - seen) / 1000, GPU_H, HIDDEN, ' class="share"' + at);
  return s;
}

function nodeCard(node, ni, holders) {
  const down = node.state !== "up";
  const sick = node.health && (node.health.state === "degraded" || node.health.state === "failed");
  const cols = Math.min(node.gpus, GPU_COLS), rows = Math.ceil(node.gpus / GPU_COLS);
  const w = cols * (GPU_W + GPU_GAP) - GPU_GAP, h = rows * (GPU_H + GPU_GAP) - GPU_GAP;
  let svg = '<svg width="' + Math.max(w, 1) + '" height="' + Math.max(h, 1) + '" role="img" aria-label="' +
    esc(node.name) + ' GPUs">';
  const hm = holders.get(node.name) || new Map();
  for (let g = 0; g < node.gpus; g++) {
    svg += gpuSvg(node, ni, g, (g % GPU_COLS) * (GPU_W + GPU_GAP),
                  Math.floor(g / GPU_COLS) * (GPU_H + GPU_GAP), hm, down);
  }
  svg += "</svg>";
  const cls = "node" + (down ? " drained" : "") + (sick ? " sick" : "");
  const reason = down ? node.drain_reason || "drained" : sick ? node.health.reasons || node.health.state : "";
  return '<div class="' + cls + '" data-node="' + esc(node.name) + '"><div class="node-head"><span class="node-name">' +
    esc(node.name) + "</span>" + (down ? '<span class="badge bad">drained</span>' : sick ? '<span class="badge warn">' +
    esc(node.health.state) + "</span>" : "") + "</div>" + svg +
    (reason ? '<div class="node-reason" title="' + esc(reason) + '">' + esc(reason) + "</div>" : "") + "</div>";
}

/* Free GPUs on nodes that are partly used, over all free GPUs of nodes that
 * take work. */
function fragmentation(nodes) {
  let free = 0, stranded = 0;
  for (const n of nodes) {
    if (n.state !== "up" || !n.gpus) continue;
    free += n.gpus_free;
    if (n.gpus_free < n.gpus) stranded += n.gpus_free;
  }
  return free ? stranded / free : 0;
}

function topoPath(node) {
  const t = node.topology || {};
  return Object.keys(t).reverse().map(k => ({level: k, name: t[k]}));
}

/* The jobs on the nodes (running and stopping), kept between polls: the
 * nodes name the jobs on them (the ones this token may see), so only jobs new
 * to the map are fetched, one by one while they are few; all of them again
 * when many changed or every JOBS_FULL_MS. At 8,000 running jobs the full
 * list is ~6 MB of JSON and most of the daemon's cost of an open console. */
const JOBS_FULL_MS = 120000, JOBS_ONE_BY_ONE = 40;

async function placedJobs(st, nodes) {
  const ids = new Set();
  for (const n of nodes) for (const id of n.jobs || []) ids.add(id);
  const cache = st.jobs || new Map();
  const unseen = st.unseen || new Set(); /* ids the API would not show this token */
  const missing = [...ids].filter(id => !cache.has(id) && !unseen.has(id));
  if (!st.jobs || Date.now() - st.jobsAt > JOBS_FULL_MS || missing.length > JOBS_ONE_BY_ONE) {
    const l = await Promise.all(["running", "stopping"].map(s => apiAll("/v1/jobs?state=" + s, "jobs")));
    st.jobs = new Map([].concat(...l).map(j => [j.id, j]));
    st.jobsAt = Date.now();
    st.unseen = new Set();
  } else {
    const got = await Promise.all(missing.map(id => api("/v1/jobs/" + id).then(d => d.job, () => {
      unseen.add(id);
      return null;
    })));
    st.unseen = unseen;
    for (const j of got) if (j) cache.set(j.id, j);
    for (const id of [...cache.keys()]) if (!ids.has(id)) cache.delete(id);
  }
  return [...st.jobs.values()].filter(j => ids.has(j.id) && (j.state === "running" || j.state === "stopping"));
}

VIEWS.map = async function (main, v) {
  const [nodesDoc, tenantsDoc] = await Promise.all([
    api("/v1/nodes"), v.state.tenants ? Promise.resolve(v.state.tenants) : api("/v1/tenants")]);
  v.state.tenants = tenantsDoc;
  setTenants(tenantsDoc.tenants.map(t => t.name));
  const nodes = nodesDoc.nodes;
  const running = await placedJobs(v.state, nodes);
  const byId = new Map(running.map(j => [j.id, j]));
  const holders = gpuHolders(running);
  let total = 0, free = 0, drained = 0, allocated = 0;
  const perTenant = new Map();
  for (const n of nodes) {
    total += n.gpus;
    if (n.state !== "up") drained += n.gpus; else free += n.gpus_free;
    for (const d of n.gpu_devices || []) {
      if (d.mode === "mig") {
        const m = (n.mig || []).find(x => x.gpu === d.gpu);
        const busy = m ? m.instances.filter(i => i.used).reduce((a, i) => a + migSlices(i.profile), 0) : 0;
        allocated += Math.min(busy, MIG_SLICES) / MIG_SLICES;
      } else {
        allocated += usedMilli(d) / 1000;
      }
    }
  }
  for (const j of running) {
    for (const p of j.placement || []) {
      const k = p.mig_profile ? migSlices(p.mig_profile) / MIG_SLICES
        : (p.gpus || []).length * Math.min(p.gpu_milli || 1000, 1000) / 1000;
      perTenant.set(j.tenant, (perTenant.get(j.tenant) || 0) + k);
    }
  }
  const seen = [...perTenant.values()].reduce((a, b) => a + b, 0);
  const hidden = Math.max(allocated - seen, 0);
  /* groups: the top level, then the rest of the path */
  const groups = new Map();
  nodes.forEach((n, i) => {
    const path = topoPath(n);
    const top = path.length ? path[0].level + " " + path[0].name : "cluster";
    const sub = path.slice(1).map(p => p.level + " " + p.name).join(" \u203a ");
    if (!groups.has(top)) groups.set(top, new Map());
    const g = groups.get(top);
    if (!g.has(sub)) g.set(sub, []);
    g.get(sub).push(i);
  });
  let html = '<div class="summary">' +
    '<div class="stat"><b>' + total + '</b><span>GPUs</span></div>' +
    '<div class="stat"><b>' + (+allocated.toFixed(2)) + '</b><span>allocated</span></div>' +
    '<div class="stat"><b>' + free + '</b><span>free whole GPUs</span></div>' +
    '<div class="stat"><b>' + drained + '</b><span>drained</span></div>' +
    '<div class="stat" id="frag"><b>' + (100 * fragmentation(nodes)).toFixed(0) + '%</b><span>fragmentation: free GPUs on partly used nodes</span></div>' +
    '</div><div class="legend">';
  for (const [t, k] of [...perTenant.entries()].sort()) {
    html += '<span class="legend-item" data-tenant="' + esc(t) + '">' + swatch(t) + ' <b>' + (+k.toFixed(2)) + "</b></span>";
  }
  if (hidden > 0.001) html += '<span class="legend-item"><span class="swatch" data-colour="' + HIDDEN + '"></span>other tenants <b>' + (+hidden.toFixed(2)) + "</b></span>";
  html += '<span class="legend-item"><span class="swatch" data-colour="' + FREE + '"></span>free</span>' +
    '<span class="legend-item"><span class="swatch" data-colour="' + DOWN + '"></span>drained</span></div>';
  for (const [top, subs] of [...groups.entries()].sort()) {
    html += '<section class="group"><h2>' + esc(top) + "</h2>";
    for (const [sub, idx] of [...subs.entries()].sort()) {
      html += '<div class="subgroup">' + (sub ? "<h3>" + esc(sub) + "</h3>" : "") + '<div class="nodes">';
      for (const i of idx) html += nodeCard(nodes[i], i, holders);
      html += "</div></div>";
    }
    html += "</section>";
  }
  main.innerHTML = html;
  paintSwatches(main);
  main.onmousemove = ev => {
    const el = ev.target.closest("[data-n]");
    if (!el) { tipHide(); return; }
    const n = nodes[Number(el.dataset.n)], g = Number(el.dataset.g);
    const dev = (n.gpu_devices || [])[g] || {};
    let h = "<b>" + esc(n.name) + " \u00b7 GPU " + g + "</b><br>" + esc(n.gpu_model || "") + " \u00b7 " + esc(dev.mode || "whole");
    if (el.dataset.j) {
      const j = byId.get(Number(el.dataset.j));
      if (j) h += "<br>job <b>" + j.id + "</b> " + esc(j.name) + "<br>" + swatch(j.tenant) + " \u00b7 " + esc(j.owner) +
        "<br>" + esc(gpusCell(j)) + " \u00b7 started " + esc(ago(j.start_time));
    } else if (el.getAttribute("fill") === HIDDEN) {
      h += "<br>in use by another tenant";
    } else {
      h += "<br>" + (n.state === "up" ? "free" : "drained: " + esc(n.drain_reason || ""));
    }
    tipShow(ev, h);
    paintSwatches($("tip"));
  };
  main.onmouseleave = tipHide;
  main.onclick = ev => {
    const el = ev.target.closest("[data-j]");
    if (el) { tipHide(); location.hash = "#/job/" + el.dataset.j; return; }
    const card = ev.target.closest("[data-node]");
    if (card) { tipHide(); location.hash = "#/nodes/" + encodeURIComponent(card.dataset.node); }
  };
};
