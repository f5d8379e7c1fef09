#!/usr/bin/python3
"""The web console in a real browser (docs/console.md).

    console_test.py TESSERAD SCREENSHOT_DIR

Starts tesserad on a virtual cluster on loopback (two leaves of whole-GPU
nodes, a node shared by fractions, a MIG node), makes work for two teams
(team-b borrows, team-a reclaims by preemption, a job waits, an admin drains
a node), then drives headless Chromium through WebDriver (chromium-driver,
python3-selenium) over /ui/: the files are served without a token and with
their security headers; sign-in; the map's GPUs per tenant match the API;
the submitted job is in the queue with its reason; team-a's token sees none
of team-b's jobs in any view (nor by typing a job's URL); the drained node
shows its reason; the preemption is in the victim's events. A screenshot of
each view goes to SCREENSHOT_DIR. The browser's console must stay free of
errors (a Content-Security-Policy violation is one). Every wait is bounded;
the whole test takes well under two minutes.

Exits 77 (skipped) when Chromium, its driver or Selenium is not installed.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

TESSERAD, SHOTS = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import FAILS, check, finish, free_port, http_call, stop_all, wait_for, wait_ready  # noqa: E402

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:
    print("skipped: python3-selenium is not installed (scripts/install-deps)")
    sys.exit(77)
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
    print("skipped: chromium or chromium-driver is not installed (scripts/install-deps)")
    sys.exit(77)

TMP = tempfile.mkdtemp(prefix="tessera-ui-")
os.makedirs(SHOTS, exist_ok=True)
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
WAIT_S = 30.0  # per wait; generous for a loaded machine running tests in parallel

CLUSTER = """topology:
  levels: [spine, leaf, node, gpu]
node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
  g4s: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288, gpu_mode: shared}
nodes:
  - {names: 'a-[1-2]', class: g4, topology: {spine: s1, leaf: leaf-a}}
  - {names: 'b-[1-2]', class: g4, topology: {spine: s1, leaf: leaf-b}}
  - {name: c-1, class: g4s, topology: {spine: s1, leaf: leaf-c}}
  - {name: d-1, class: g4, topology: {spine: s1, leaf: leaf-c}}
"""
TENANTS = """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 24}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 12}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 12}}}
"""


def call(method, path, token=None, body=None):
    return http_call(URL, method, path, token, body)


def spec(tenant, name, gpus=4, count=1, tier="guaranteed", duration="600s", **kw):
    s = {"tenant": tenant, "name": name, "tier": tier,
         "tasks": [{"count": count, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024}],
         "time_limit": "1h", "duration": duration, "command": ["true"]}
    s.update(kw)
    return s


def job(tok, jid):
    st, d = call("GET", f"/v1/jobs/{jid}", tok)
    return d["job"] if st == 200 else None


for name, text in [("cluster.yaml", CLUSTER), ("tenants.yaml", TENANTS)]:
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)
with open(os.path.join(TMP, "tesserad.yaml"), "w") as f:
    f.write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
virtual_nodes: all
state_dir: state
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 1s, backoff: 30s}}
""")

log = open(os.path.join(TMP, "tesserad.log"), "ab")
procs = [subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                          stdout=log, stderr=log)]
driver = None
try:
    if not wait_ready(URL):
        check(False, "tesserad is ready")
        raise SystemExit
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    toks = {}
    for name, tenant in [("alice", "team-a"), ("bob", "team-b"), ("ann", "team-a")]:
        st, d = call("POST", "/v1/tokens", admin, {"name": name, "role": "user", "tenant": tenant})
        toks[name] = d["token"]["secret"]

    # ---- the files: public, with their headers ----
    req = urllib.request.Request(URL + "/ui/")
    with urllib.request.urlopen(req, timeout=10) as r:
        csp = r.headers.get("Content-Security-Policy", "")
        etag = r.headers.get("ETag")
        check(r.status == 200 and "text/html" in r.headers["Content-Type"], "/ui/ is served without a token")
        check("script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp,
              f"/ui/ carries a strict Content-Security-Policy ({csp})")
        check(r.headers.get("X-Content-Type-Options") == "nosniff", "nosniff")
    st, _ = call("GET", "/ui/no-such-file.js")
    check(st == 404, "an unknown console file is a 404")
    try:
        urllib.request.urlopen(urllib.request.Request(URL + "/ui/", headers={"If-None-Match": etag}), timeout=10)
        check(False, "a revalidation with the ETag answers 304")
    except urllib.error.HTTPError as e:
        check(e.code == 304, f"a revalidation with the ETag answers 304 ({e.code})")
    st, _ = call("POST", "/ui/")
    check(st == 405, "the console's files answer GET only")
    head = urllib.request.Request(URL + "/ui/app.js", method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as r:
        check(r.status == 200 and "javascript" in r.headers["Content-Type"] and not r.read(),
              "HEAD answers the headers alone")

    class NoFollow(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None
    try:
        urllib.request.build_opener(NoFollow).open(URL + "/ui", timeout=10)
        check(False, "/ui redirects to /ui/")
    except urllib.error.HTTPError as e:
        check(e.code == 301 and e.headers.get("Location") == "/ui/", f"/ui redirects to /ui/ ({e.code})")
    st, _ = call("GET", "/v1/jobs")
    check(st == 401, "the API still needs a token")

    # ---- work: a node drains, team-b borrows, team-a reclaims, a job waits ----
    st, _ = call("POST", "/v1/nodes/d-1/drain", admin)
    check(st == 200, "admin drains d-1")
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "alice-share",
                                                         tasks=[{"count": 1, "gpu_fraction": 0.25,
                                                                 "cpu_milli": 1000, "memory_mib": 1024}]))
    check(st == 201, f"a quarter-GPU job is accepted ({d})")
    sid = d["jobs"][0]["id"] if st == 201 else 0
    wait_for(lambda: (job(toks["alice"], sid) or {}).get("state") == "running",
             f"the quarter-GPU job runs on c-1 ({job(toks['alice'], sid)})")
    st, d = call("POST", "/v1/jobs", toks["bob"], spec("team-b", "bob-secret-sweep", tier="opportunistic",
                                                       array_size=4))
    bids = [j["id"] for j in d["jobs"]]
    wait_for(lambda: all((job(toks["bob"], b) or {}).get("state") == "running" for b in bids),
             "team-b borrows 16 GPUs")
    time.sleep(1.2)  # past min_runtime
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "alice-train", count=2))
    aid = d["jobs"][0]["id"]
    wait_for(lambda: (job(toks["alice"], aid) or {}).get("state") == "running",
             "team-a's guaranteed job reclaims GPUs by preemption")
    victim = wait_for(lambda: next((b for b in bids if (job(toks["bob"], b) or {}).get("preemptions")), None),
                      "a borrowed job was preempted")
    # 12 GPUs: within team-a's guarantee (more would be refused at submission),
    # above what it has left while its other jobs run: it waits on quota
    # it runs in an image with data (docs/images.md): its page shows both
    IMAGE = "registry.example.com/team-a/train:1"
    DATA = "registry.example.com/models/w@sha256:" + "a" * 64
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "alice-waits", gpus=4, count=3,
                                                         image=IMAGE,
                                                         data=[{"ref": DATA, "path": "/models/w"}]))
    wid = d["jobs"][0]["id"]
    waiting = wait_for(lambda: (job(toks["alice"], wid) or {}).get("reason"), "the big job gets a reason")

    # ---- the browser ----
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--force-device-scale-factor=1", "--lang=en-US"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(30)

    def until(pred, what):
        def safe():  # views redraw while polled: an element may go stale mid-check
            try:
                return pred()
            except Exception:
                return None
        return wait_for(safe, what, timeout=WAIT_S, step=0.1)

    def text():
        return driver.find_element(By.TAG_NAME, "body").text

    def go(view):
        driver.get(URL + "/ui/#/" + view)

    def sign_in(token):
        driver.get(URL + "/ui/")
        driver.execute_script("sessionStorage.clear()")
        driver.get(URL + "/ui/")
        box = until(lambda: driver.find_element(By.ID, "token"), "the sign-in form shows")
        box.send_keys(token)
        driver.find_element(By.ID, "signin-button").click()
        until(lambda: driver.find_element(By.ID, "main").is_displayed(), "signed in")

    def legend():
        """tenant -> GPUs from the map's legend."""
        out = {}
        for el in driver.find_elements(By.CSS_SELECTOR, ".legend-item"):
            parts = el.text.rsplit(" ", 1)
            if len(parts) == 2:
                try:
                    out[parts[0]] = float(parts[1])
                except ValueError:
                    pass
        return out

    def api_gpus(token):
        per = {}
        for state in ("running", "stopping"):
            for j in call("GET", f"/v1/jobs?state={state}&limit=1000", token)[1]["jobs"]:
                for p in j["placement"] or []:
                    per[j["tenant"]] = per.get(j["tenant"], 0) + len(p["gpus"]) * min(p.get("gpu_milli") or 1000, 1000) / 1000
        return per

    # wrong token first
    driver.get(URL + "/ui/")
    until(lambda: driver.find_element(By.ID, "token").is_displayed(), "the sign-in form shows")
    driver.find_element(By.ID, "token").send_keys("tsk_wrong")
    driver.find_element(By.ID, "signin-button").click()
    until(lambda: "unknown or revoked" in driver.find_element(By.ID, "signin-error").text,
          "a wrong token is refused with the reason")
    driver.save_screenshot(os.path.join(SHOTS, "signin.png"))

    # admin: the whole cluster
    sign_in(admin)
    go("map")
    until(lambda: driver.find_elements(By.CSS_SELECTOR, ".node svg rect.gpu"), "the map draws GPUs")
    until(lambda: len(driver.find_elements(By.CSS_SELECTOR, "rect.gpu")) == 24, "24 GPUs on the map")
    want = api_gpus(admin)
    got = until(lambda: legend() if all(abs(legend().get(t, -1) - v) < 0.01 for t, v in want.items()) else None,
                f"the admin's map shows each tenant's GPUs as the API does ({want})")
    check("other tenants" not in text(), "the admin sees every tenant by name")
    check("drained" in text() and "drained by an admin" in text(), "the map marks the drained node with its reason")
    check("fragmentation" in text(), "the map shows the fragmentation figure")
    driver.save_screenshot(os.path.join(SHOTS, "map-admin.png"))
    go("nodes")
    until(lambda: "drained by an admin" in text(), "the nodes view shows d-1's drain reason")
    row = until(lambda: next((r for r in driver.find_elements(By.CSS_SELECTOR, "#n-table tbody tr") if r.text.startswith("d-1")), None),
                "d-1 is listed")
    check(row is not None and "resume" in row.text, "an admin is offered resume on the drained node")
    driver.save_screenshot(os.path.join(SHOTS, "nodes-admin.png"))
    go("tenants")
    until(lambda: "team-a" in text() and "team-b" in text() and driver.find_elements(By.CSS_SELECTOR, ".bar"),
          "the tenants view draws bars for both teams")
    until(lambda: driver.find_elements(By.CSS_SELECTOR, "svg.chart"), "the GPU-hours chart draws")
    driver.save_screenshot(os.path.join(SHOTS, "tenants-admin.png"))

    # team-b: the preemption in the victim's events
    sign_in(toks["bob"])
    go(f"job/{victim}")
    until(lambda: "preempted" in driver.find_element(By.ID, "j-events").text,
          "the victim's job page shows its preemption")
    ev = driver.find_element(By.ID, "j-events").text
    check("for another tenant's guaranteed work (reclaim)" in ev and f"job {aid}" not in ev
          and "team-a" not in ev,
          f"the preemption says another tenant's guaranteed work, naming neither ({ev!r})")
    check("tier=" not in ev and "start=17" not in ev, "events read in words, not raw key=value")
    driver.save_screenshot(os.path.join(SHOTS, "job-preempted.png"))

    # team-a: its own work only, everywhere
    sign_in(toks["alice"])
    go("map")
    until(lambda: driver.find_elements(By.CSS_SELECTOR, "rect.gpu"), "team-a's map draws")
    mine = api_gpus(toks["alice"])
    until(lambda: abs(legend().get("team-a", -1) - mine.get("team-a", 0)) < 0.01,
          f"team-a's map shows its {mine.get('team-a')} GPUs")
    check("team-b" not in legend(), "team-a's map names no other tenant's GPUs")
    check(legend().get("other tenants", 0) > 0, "other tenants' GPUs are drawn as used, anonymously")
    ids_on_map = {int(e.get_attribute("data-j")) for e in driver.find_elements(By.CSS_SELECTOR, "[data-j]")}
    check(ids_on_map and not ids_on_map & set(bids), f"no team-b job id on team-a's map ({ids_on_map})")
    driver.save_screenshot(os.path.join(SHOTS, "map-team-a.png"))
    go("queue")
    row = until(lambda: next((r for r in driver.find_elements(By.CSS_SELECTOR, "#q-table tbody tr")
                              if r.get_attribute("data-job") == str(wid)), None), "the waiting job is in the queue")
    check(row is not None and waiting in row.text and "pending" in row.text,
          f"the queue shows the waiting job with its reason {waiting!r}")
    share_row = until(lambda: next((r for r in driver.find_elements(By.CSS_SELECTOR, "#q-table tbody tr")
                                    if r.get_attribute("data-job") == str(sid)), None),
                      "the quarter-GPU job is in the queue")
    check(share_row is not None and "1\u00d70.25 H100-80GB (0.25 GPUs)" in share_row.text,
          f"the queue shows its GPUs as the CLI does (gpus_text): {share_row and share_row.text}")
    driver.save_screenshot(os.path.join(SHOTS, "queue-team-a.png"))
    go(f"job/{wid}")
    until(lambda: "explanation" in text() and waiting in text(), "the job page explains why it waits")
    until(lambda: IMAGE in driver.find_element(By.ID, "j-image").text and
          DATA in driver.find_element(By.ID, "j-data").text and
          "/models/w" in driver.find_element(By.ID, "j-data").text,
          "the job page shows its image and its data")
    driver.save_screenshot(os.path.join(SHOTS, "job-waiting.png"))
    go(f"job/{aid}")
    until(lambda: "Placement" in text() and "rank" in text(), "the running job's page shows its placement")
    check(f"tessera port-forward {aid} 8888:8888" in text() and f"tessera exec {aid}" in text(),
          "the running job's page shows how to reach it (docs/interactive.md)")
    driver.save_screenshot(os.path.join(SHOTS, "job-running.png"))
    leaks = []
    for view in ["map", "queue", "tenants", "nodes", f"job/{victim}"]:
        go(view)
        time.sleep(0.8)
        src = driver.page_source
        if "bob-secret-sweep" in src or any(f'data-j="{b}"' in src or f'data-job="{b}"' in src for b in bids):
            leaks.append(view)
    check(not leaks, f"team-a's token sees none of team-b's jobs in any view (leaks in {leaks})")
    go(f"job/{victim}")
    until(lambda: "does not exist" in driver.find_element(By.ID, "status").text,
          "team-b's job by URL answers 'does not exist' to team-a")
    check("preempted" not in text(), "no events of team-b's job reach team-a")
    go("nodes")
    until(lambda: "drained by an admin" in text(), "team-a sees the drain reason too")
    check(not driver.find_elements(By.CSS_SELECTOR, "button[data-act]"), "a user is offered no drain buttons")

    # another user of team-a: the job's metadata, its content hidden (docs/secrets.md)
    sign_in(toks["ann"])
    go(f"job/{aid}")
    until(lambda: "Placement" in text() and "hidden" in driver.find_element(By.ID, "j-facts").text,
          "another team-a user's job page says which fields are hidden")
    spec_text = driver.find_element(By.ID, "j-spec").text
    check('"env": "hidden"' in spec_text and '"command": "hidden"' in spec_text,
          f"the spec shows env and command as hidden ({spec_text[:200]!r})")
    until(lambda: "hidden" in driver.find_element(By.ID, "log-out").text,
          "the logs card says the output is hidden")
    driver.save_screenshot(os.path.join(SHOTS, "job-hidden.png"))

    # an admin resumes and drains a node from the nodes view
    sign_in(admin)
    # first, a view whose answer comes late never draws over the next one:
    # the map's requests wait 1.5 s, and the nodes view is opened meanwhile
    # (the late map replaced the nodes table, which then failed every poll)
    driver.execute_script(
        "window.realApi = api; window.api = async function (p, o) {"
        " if (T.view && T.view.name === 'map') await new Promise(r => setTimeout(r, 1500));"
        " return window.realApi(p, o); };")
    go("map")
    time.sleep(0.3)
    go("nodes")
    time.sleep(2.5)
    check(bool(driver.find_elements(By.ID, "n-table")) and
          "error" not in driver.find_element(By.ID, "status").get_attribute("class"),
          "a late answer to the map view does not draw over the nodes view "
          f"(status: {driver.find_element(By.ID, 'status').text!r})")
    driver.execute_script("window.api = window.realApi;")

    def click(node, label):
        """Clicks node's button once it reads label. The table is redrawn on
        every poll, so the button is looked up by its node in one call, not
        row by row: on a loaded machine a walk over the rows, a WebDriver
        call per row, can outlast the poll and keep meeting a redrawn row."""
        # found and clicked inside the browser in one script: no redraw can
        # come between the lookup and the click (a loaded machine made the
        # WebDriver round trips meet redrawn rows)
        return bool(driver.execute_script(
            "const bs = document.querySelectorAll("
            "'#n-table button[data-act][data-node=\"' + arguments[0] + '\"]');"
            "for (const b of bs) { if (b.textContent.trim() === arguments[1]) {"
            " b.click(); return true; } } return false;", node, label))
    if not until(lambda: click("d-1", "resume"), "the drained node offers resume"):
        # what the page shows instead (looked up without raising: a missing
        # table is itself the finding)
        tables = driver.find_elements(By.ID, "n-table")
        print("  at", driver.current_url, "signed in as:",
              [e.text for e in driver.find_elements(By.ID, "who")], "status:",
              [e.text for e in driver.find_elements(By.ID, "status")], "; the table:",
              tables[0].get_attribute("outerHTML")[:3000] if tables else "(none)",
              "; the page:", text()[:1500])
    until(lambda: call("GET", "/v1/nodes/d-1", admin)[1]["node"]["state"] == "up", "resume from the console")
    until(lambda: click("d-1", "drain"), "the node, up again, offers drain")
    until(lambda: call("GET", "/v1/nodes/d-1", admin)[1]["node"]["state"] == "drained", "drain from the console")

    # the browser's console: no errors (CSP violations, exceptions)
    # (answers the API gives on purpose are logged by the browser as failed
    # loads: 404 for the other tenant's job, 409 for a virtual job's logs)
    errs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
            and not (e.get("source") == "network" and any(f"status of {c}" in e["message"] for c in (401, 404, 409)))]
    check(not errs, f"no errors in the browser's console ({errs[:3]})")
    signout = driver.find_element(By.ID, "signout")
    signout.click()
    check(driver.execute_script("return sessionStorage.getItem('tessera.token')") is None,
          "signing out forgets the token")
finally:
    if driver:
        driver.quit()
    stop_all(procs)
finish(TMP, ["tesserad.log"])
