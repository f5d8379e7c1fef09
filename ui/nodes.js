/*
 * nodes.js - every node with its health as its agent reports it (Xid, ECC,
 * throttling, PCIe and NVLink findings arrive in health.reasons), why it
 * takes no work when drained, its GPUs and MIG layout, and drain/resume
 * buttons for admins. The buttons are offered to a token that looks like an
 * admin's; the API alone decides (a 403 is shown as it comes).
 * #/nodes/NAME opens one node's details under the table.
 */
"use strict";

function healthCell(n) {
  const h = n.health || {};
  const cls = h.state === "ok" ? "ok" : h.state === "degraded" ? "warn" : h.state === "failed" ? "bad" : "";
  return '<span class="badge ' + cls + '">' + esc(h.state || "unknown") + "</span> " +
    '<span class="muted">' + esc(h.reasons || h.source || "") + "</span>";
}

function nodeDetails(n) {
  const mig = (n.mig || []).map(m => "GPU " + m.gpu + ": " + m.instances.map(i => i.profile + "@" + i.start + (i.used ? " (used)" : "")).join(", "));
  const devs = (n.gpu_devices || []).map(d => "GPU " + d.gpu + " " + d.mode + ", " + (d.used_milli / 1000) + " used, " + d.tasks + " task" + (d.tasks === 1 ? "" : "s"));
  return '<div class="card" id="node-detail"><h2>' + esc(n.name) + "</h2><dl class=\"kv\">" +
    "<dt>state</dt><dd>" + esc(n.state) + (n.drain_reason ? " \u2014 " + esc(n.drain_reason) : "") + "</dd>" +
    "<dt>health</dt><dd>" + healthCell(n) + "</dd>" +
    (n.health && n.health.last_seen ? "<dt>agent last seen</dt><dd>" + esc(isoTime(n.health.last_seen)) + " (" + esc(ago(n.health.last_seen)) + ")</dd>" : "") +
    "<dt>topology</dt><dd>" + esc(Object.keys(n.topology || {}).reverse().map(k => k + " " + n.topology[k]).join(" \u203a ") || "-") + "</dd>" +
    "<dt>GPUs</dt><dd>" + esc(n.gpus + "\u00d7" + (n.gpu_model || "none") + ", " + n.gpus_free + " free") + "</dd>" +
    "<dt>CPU</dt><dd>" + esc((n.cpu_free_milli / 1000) + " of " + (n.cpu_milli / 1000) + " cores free") + "</dd>" +
    "<dt>memory</dt><dd>" + esc(Math.round(n.memory_free_mib / 1024) + " of " + Math.round(n.memory_mib / 1024) + " GiB free") + "</dd>" +
    "<dt>devices</dt><dd>" + devs.map(esc).join("<br>") + "</dd>" +
    (mig.length ? "<dt>MIG</dt><dd>" + mig.map(esc).join("<br>") + "</dd>" : "") +
    (n.mig_error ? "<dt>MIG error</dt><dd class=\"error\">" + esc(n.mig_error) + "</dd>" : "") +
    "<dt>labels</dt><dd>" + esc(Object.entries(n.labels || {}).map(([k, v]) => k + "=" + v).join(", ") || "-") + "</dd></dl></div>";
}

VIEWS.nodes = async function (main, v) {
  const st = v.state;
  const admin = T.me && T.me.role === "admin";
  if (!st.built) {
    main.innerHTML = '<div class="toolbar"><input id="n-text" type="search" placeholder="filter: name, reason, model" aria-label="filter">' +
      '<label><input id="n-down" type="checkbox"> drained or unhealthy only</label><span id="n-msg" class="muted"></span></div>' +
      '<table class="grid" id="n-table"><thead><tr><th>NODE</th><th>WHERE</th><th>MODEL</th><th class="num">GPUS FREE</th><th>STATE</th>' +
      '<th>DRAIN REASON</th><th>HEALTH</th>' + (admin ? "<th></th>" : "") + '</tr></thead><tbody></tbody></table><div id="n-detail"></div>';
    for (const id of ["n-text", "n-down"]) $(id).addEventListener("input", () => draw());
    $("n-table").addEventListener("click", async ev => {
      const b = ev.target.closest("button[data-act]");
      if (!b) return;
      b.disabled = true;
      try {
        await api("/v1/nodes/" + encodeURIComponent(b.dataset.node) + "/" + b.dataset.act, {method: "POST", body: {}});
        $("n-msg").textContent = b.dataset.node + ": " + b.dataset.act + " done";
        $("n-msg").className = "muted";
      } catch (e) {
        $("n-msg").textContent = b.dataset.node + ": " + e.message;
        $("n-msg").className = "error";
      }
      VIEWS.nodes(main, v).catch(() => {});
    });
    st.built = true;
  }
  const doc = await api("/v1/nodes");
  st.nodes = doc.nodes;
  function draw() {
    const text = $("n-text").value.trim().toLowerCase(), down = $("n-down").checked;
    const rows = st.nodes.filter(n => (!down || n.state !== "up" || (n.health && n.health.state !== "ok")) &&
      (!text || [n.name, n.drain_reason, n.gpu_model, n.health && n.health.reasons].some(x => String(x || "").toLowerCase().includes(text))));
    document.querySelector("#n-table tbody").innerHTML = rows.slice(0, 2000).map(n =>
      '<tr><td><a href="#/nodes/' + encodeURIComponent(n.name) + '">' + esc(n.name) + "</a></td><td>" +
      esc(Object.keys(n.topology || {}).reverse().map(k => n.topology[k]).join(" \u203a ")) + "</td><td>" + esc(n.gpu_model || "-") +
      '</td><td class="num">' + n.gpus_free + " / " + n.gpus + '</td><td><span class="state s-' + (n.state === "up" ? "running" : "failed") + '">' +
      esc(n.state) + '</span></td><td class="reason">' + esc(n.drain_reason || "") + "</td><td>" + healthCell(n) + "</td>" +
      (admin ? '<td><button class="quiet" data-node="' + esc(n.name) + '" data-act="' + (n.state === "up" ? "drain" : "resume") + '">' +
        (n.state === "up" ? "drain" : "resume") + "</button></td>" : "") + "</tr>").join("");
    const sel = v.arg ? st.nodes.find(n => n.name === decodeURIComponent(v.arg)) : null;
    $("n-detail").innerHTML = sel ? nodeDetails(sel) : "";
  }
  draw();
};
