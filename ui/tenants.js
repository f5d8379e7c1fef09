/*
 * tenants.js - each tenant's guarantee, use, borrowing and lending per GPU
 * model as bars, its fair share, and GPU-hours over time as a stacked SVG
 * chart built from the usage API (one /v1/usage call per bucket, refreshed
 * once a minute, not on every poll).
 *
 * borrowed = what a tenant uses above its guarantee; lent = the part of its
 * unused guarantee that others' borrowing takes, split between lenders in
 * proportion to what each leaves unused (the API gives use and guarantee;
 * which lender a borrower's GPU came from is not recorded).
 */
"use strict";

const USAGE_BUCKETS = 12;
const USAGE_REFRESH_MS = 60000;
const USAGE_SPANS = {"6h": 6 * 3600, "24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400};

function tenantRows(tenants) {
  const models = new Set();
  for (const t of tenants) {
    Object.keys(t.guaranteed.gpu || {}).forEach(m => models.add(m));
    Object.keys(t.usage.gpu || {}).forEach(m => models.add(m));
  }
  const leaves = tenants.filter(t => !tenants.some(c => c.parent === t.name));
  const rows = [];
  for (const m of [...models].sort()) {
    let unused = 0, borrowed = 0;
    const r = leaves.map(t => {
      const g = (t.guaranteed.gpu || {})[m] || 0, u = (t.usage.gpu || {})[m] || 0;
      unused += Math.max(g - u, 0);
      borrowed += Math.max(u - g, 0);
      return {t, model: m, g, u, borrowed: Math.max(u - g, 0), idle: Math.max(g - u, 0)};
    });
    for (const x of r) x.lent = unused > 0 ? Math.min(borrowed, unused) * x.idle / unused : 0;
    rows.push(...r);
  }
  return rows;
}

function bar(x, max) {
  const pct = v => (max > 0 ? (100 * v / max) : 0).toFixed(2) + "%";
  const own = Math.min(x.u, x.g);
  return '<div class="bar" title="used ' + x.u + " of " + x.g + ' guaranteed">' +
    '<span class="seg used" data-width="' + pct(own) + '" data-colour="' + tenantColour(x.t.name) + '"></span>' +
    '<span class="seg borrowed" data-width="' + pct(x.borrowed) + '"></span>' +
    '<span class="seg lent" data-width="' + pct(x.lent) + '"></span>' +
    '<span class="seg idle" data-width="' + pct(Math.max(x.idle - x.lent, 0)) + '"></span>' +
    '<span class="mark" data-left="' + pct(x.g) + '"></span></div>';
}

async function usageSeries(span) {
  const now = Date.now() / 1000, step = span / USAGE_BUCKETS;
  const calls = [];
  for (let i = 0; i < USAGE_BUCKETS; i++) {
    const from = now - span + i * step;
    calls.push(api("/v1/usage?from=" + from.toFixed(0) + "&to=" + (from + step).toFixed(0)).then(d => ({from, d})));
  }
  return Promise.all(calls);
}

function usageChart(series, width) {
  const W = Math.max(width || 760, 400), H = 230, L = 56, B = 26, TOP = 10, PH = H - B - TOP;
  const tenants = new Set();
  const totals = series.map(s => {
    const m = new Map();
    for (const u of s.d.usage) { tenants.add(u.tenant); m.set(u.tenant, (m.get(u.tenant) || 0) + u.gpu_hours); }
    return m;
  });
  const max = Math.max(1e-9, ...totals.map(m => [...m.values()].reduce((a, b) => a + b, 0)));
  const bw = (W - L) / series.length;
  let svg = '<svg class="chart" width="' + W + '" height="' + H + '" role="img" aria-label="GPU-hours over time">';
  const digits = max >= 40 ? 0 : max >= 4 ? 1 : max >= 0.4 ? 2 : 3;
  for (let k = 0; k <= 4; k++) {
    const y = TOP + PH * (1 - k / 4);
    svg += '<line x1="' + L + '" x2="' + W + '" y1="' + y + '" y2="' + y + '" stroke="#e3e7ee"/>' +
      '<text x="' + (L - 6) + '" y="' + (y + 4) + '" text-anchor="end" class="axis">' + (max * k / 4).toFixed(digits) + "</text>";
  }
  const names = [...tenants].sort();
  series.forEach((s, i) => {
    let y = H - B;
    for (const t of names) {
      const v = totals[i].get(t) || 0;
      if (!v) continue;
      const h = PH * v / max;
      y -= h;
      svg += '<rect x="' + (L + i * bw + 2).toFixed(1) + '" y="' + y.toFixed(1) + '" width="' + (bw - 4).toFixed(1) + '" height="' + h.toFixed(1) +
        '" fill="' + tenantColour(t) + '"><title>' + esc(t) + ": " + v.toFixed(2) + " GPU-h</title></rect>";
    }
    if (i % 2 === 0) {
      const d = new Date(s.from * 1000);
      svg += '<text x="' + (L + i * bw + bw / 2).toFixed(1) + '" y="' + (H - 8) + '" text-anchor="middle" class="axis">' +
        esc(pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" + pad(d.getMinutes())) + "</text>";
    }
  });
  svg += "</svg>";
  return svg + '<div class="legend">' + names.map(t => '<span class="legend-item">' + swatch(t) + "</span>").join("") +
    (names.length ? "" : '<span class="muted">no GPU-hours recorded in this window</span>') + "</div>";
}

VIEWS.tenants = async function (main, v) {
  const st = v.state;
  if (!st.built) {
    main.innerHTML = '<div class="card"><h2>Guarantee and use per GPU model</h2><div class="legend">' +
      '<span class="legend-item"><span class="swatch used-key"></span>used within guarantee</span>' +
      '<span class="legend-item"><span class="swatch borrowed-key"></span>borrowed</span>' +
      '<span class="legend-item"><span class="swatch lent-key"></span>lent to others</span>' +
      '<span class="legend-item"><span class="swatch idle-key"></span>guaranteed, unused</span></div>' +
      '<table class="grid" id="t-table"><thead><tr><th>TENANT</th><th>MODEL</th><th class="num">GUARANTEED</th><th class="num">USED</th>' +
      '<th class="num">BORROWED</th><th class="num">LENT</th><th class="wide"></th><th class="num">FAIR SHARE</th><th class="num">SHARE NOW</th></tr></thead><tbody></tbody></table></div>' +
      '<div class="card"><h2>GPU-hours over time, per tenant <select id="u-span" aria-label="window">' +
      Object.keys(USAGE_SPANS).map(k => "<option" + (k === "24h" ? " selected" : "") + ">" + k + "</option>").join("") +
      '</select></h2><div id="u-chart" class="muted">loading\u2026</div></div>';
    $("u-span").addEventListener("change", () => { st.usageAt = 0; VIEWS.tenants(main, v).catch(() => {}); });
    st.built = true;
  }
  const doc = await api("/v1/tenants");
  setTenants(doc.tenants.map(t => t.name));
  const rows = tenantRows(doc.tenants);
  const max = Math.max(1, ...rows.map(x => Math.max(x.g, x.u) + x.lent));
  document.querySelector("#t-table tbody").innerHTML = rows.map(x =>
    "<tr><td>" + (x.t.parent ? '<span class="muted">' + esc(x.t.parent) + " / </span>" : "") + swatch(x.t.name) + "</td><td>" + esc(x.model) +
    '</td><td class="num">' + x.g + '</td><td class="num">' + (+x.u.toFixed(2)) + '</td><td class="num">' + (+x.borrowed.toFixed(2)) +
    '</td><td class="num">' + (+x.lent.toFixed(2)) + '</td><td class="wide">' + bar(x, max) + '</td><td class="num">' +
    (typeof x.t.share === "number" ? x.t.share.toFixed(3) : "-") + '</td><td class="num">' +
    (typeof x.t.usage_share === "number" ? x.t.usage_share.toFixed(3) : "-") + "</td></tr>").join("") ||
    '<tr><td colspan="9" class="muted">no tenants</td></tr>';
  for (const el of main.querySelectorAll("[data-left]")) el.style.left = el.dataset.left;
  paintSwatches(main);
  if (!st.usageAt || Date.now() - st.usageAt > USAGE_REFRESH_MS) {
    st.usageAt = Date.now();
    const series = await usageSeries(USAGE_SPANS[$("u-span").value] || 86400);
    $("u-chart").className = "";
    $("u-chart").innerHTML = usageChart(series, $("u-chart").clientWidth - 4);
    paintSwatches($("u-chart"));
  }
};
