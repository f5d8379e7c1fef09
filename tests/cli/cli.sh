#!/usr/bin/env bash
# cli.sh - the `tessera` CLI's contract, as CTest runs it:
#
#   tests/cli/cli.sh CLI_BIN
#
# Starts tests/cli/fake_server.py (a stand-in for tesserad on an ephemeral
# port of 127.0.0.1) and proves, for every command, what users and scripts
# rely on: the table output, --output json (parses) and yaml (parses to the
# same data where PyYAML is installed, else a shape check), and the EXIT
# CODES: 2 for usage errors with nothing on stdout, 3 for 404, 4 for 400 /
# 409 / 413 / 429 with the server's message and every field error, 5 for
# 401 / 403, 6 for a closed port, an unresolvable host, a timeout or an
# untrusted certificate (naming the URL), 7 for 5xx, a non-JSON answer and
# a redirect, 1 when the output cannot be written. Also: flags > env >
# config file, the warning for a token file others may read, what is sent
# (query escaping, Content-Type, Idempotency-Key), cursors followed by --all.
# Every run is bounded by RUN_TIMEOUT_S; the server is killed on exit. The
# last line is "N passed, M failed"; any failure exits 1; no python3 exits
# 77 (skipped).
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 CLI_BIN" >&2
  exit 2
fi
CLI=$1
HERE=$(cd "$(dirname "$0")" && pwd)
RUN_TIMEOUT_S=20
SERVER_START_S=10
if ! command -v python3 >/dev/null; then
  echo "SKIP: python3 is needed for the fake server"
  exit 77
fi
# the interpreter itself, not a version manager's shim that costs a second a call
PY=$(python3 -c 'import sys; print(sys.executable)')

tmp=$(mktemp -d)
server_pids=()
cleanup() {
  for p in "${server_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A hermetic environment: no real config file, no inherited server or token.
export HOME=$tmp/home TZ=UTC
unset XDG_CONFIG_HOME TESSERA_URL TESSERA_TOKEN
mkdir -p "$HOME"

passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() {
  failed=$((failed + 1))
  echo "FAIL: $*"
  if [ -s "$tmp/err" ]; then sed 's/^/  stderr: /' "$tmp/err" | head -n 6; fi
}

# start_server PORT_FILE [--tls CERT KEY]: starts one, waits for its port
start_server() {
  local pf=$1
  shift
  "$PY" "$HERE/fake_server.py" "$pf" "$@" 2>>"$tmp/server.log" &
  server_pids+=($!)
  local waited=0
  while [ ! -s "$pf" ]; do
    sleep 0.1
    waited=$((waited + 1))
    if [ "$waited" -ge $((SERVER_START_S * 10)) ]; then
      echo "FAIL: fake server did not start"; cat "$tmp/server.log"; exit 1
    fi
  done
}

start_server "$tmp/port"
PORT=$(cat "$tmp/port")
URL=http://127.0.0.1:$PORT
export TESSERA_URL=$URL TESSERA_TOKEN=tsk_admin

# cli ARGS...: runs the CLI; exit code in $rc, output in $tmp/out, $tmp/err
cli() {
  timeout "$RUN_TIMEOUT_S" "$CLI" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  rc=$?
}

# expect NAME RC ARGS...: runs the CLI, checks the exit code; false if wrong
expect() {
  local name=$1 want=$2
  shift 2
  cli "$@"
  if [ "$rc" -ne "$want" ]; then
    fail "$name: exit $rc, expected $want"
    return 1
  fi
  pass
}
out_has() { if grep -qE -- "$2" "$tmp/out"; then pass; else fail "$1: stdout lacks /$2/"; sed 's/^/  stdout: /' "$tmp/out" | head -n 8; fi; }
err_has() { if grep -qiE -- "$2" "$tmp/err"; then pass; else fail "$1: stderr lacks /$2/"; fi; }
out_lacks() { if grep -qE -- "$2" "$tmp/out"; then fail "$1: stdout has /$2/"; else pass; fi; }
same() { if cmp -s "$tmp/out" "$2"; then pass; else fail "$1: stdout differs"; fi; }
out_empty() { if [ -s "$tmp/out" ]; then fail "$1: printed on stdout"; else pass; fi; }
err_empty() { if [ -s "$tmp/err" ]; then fail "$1: printed on stderr"; else pass; fi; }
out_lines() {
  local n
  n=$(wc -l <"$tmp/out")
  if [ "$n" -eq "$2" ]; then pass; else fail "$1: $n lines on stdout, expected $2"; fi
}
# json_ok NAME PYTHON_EXPR: stdout is JSON and EXPR (over d) holds
json_ok() {
  if "$PY" -c "import json,sys; d=json.load(open(sys.argv[1], encoding=\"utf-8\")); sys.exit(0 if ($2) else 1)" \
    "$tmp/out" 2>>"$tmp/err"; then pass; else fail "$1: JSON check ($2)"; fi
}
# last_ok NAME PYTHON_EXPR: EXPR (over d) holds for what the server last received
last_ok() {
  if "$PY" - "$URL/_debug/last" "$2" <<'EOF' 2>>"$tmp/err"; then pass; else fail "$1: request check ($2)"; fi
import json, sys, urllib.request
d = json.load(urllib.request.urlopen(sys.argv[1], timeout=10))
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}
have_pyyaml=0
"$PY" -c 'import yaml' 2>/dev/null && have_pyyaml=1
# yaml_same NAME ARGS...: `-o yaml` parses to what `-o json` gives
yaml_same() {
  local name=$1
  shift
  expect "$name json" 0 -o json "$@" || return
  cp "$tmp/out" "$tmp/json"
  expect "$name yaml" 0 -o yaml "$@" || return
  if [ "$have_pyyaml" -eq 1 ]; then
    if "$PY" -c '
import json, sys, yaml
y = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if y == json.load(open(sys.argv[2], encoding="utf-8")) else 1)' \
      "$tmp/out" "$tmp/json" 2>>"$tmp/err"; then pass; else fail "$name: YAML differs from JSON"; fi
  elif grep -qE '^[a-z_]+:' "$tmp/out" && ! grep -q '^{' "$tmp/out"; then
    pass
  else
    fail "$name: not block YAML"
  fi
}

# ---- help, version, usage errors (exit 2, nothing on stdout) ----
expect "--version" 0 --version && out_has "--version" "^tessera [0-9]+\.[0-9]+\.[0-9]+$"
expect "--help" 0 --help && out_has "--help" "Commands:"
expect "no command" 2 && out_empty "no command"
for c in submit jobs show cancel hold release requeue explain events logs nodes node drain resume \
  tenants quota "quota set" usage tokens "tokens create" "tokens revoke" secrets "secrets set" \
  "secrets rm" "secrets events"; do
  # shellcheck disable=SC2086
  expect "$c --help" 0 $c --help && out_has "$c --help" "^usage: tessera $c"
done
expect "help jobs" 0 help jobs && out_has "help jobs" "^usage: tessera jobs"

bad() { # bad NAME STDERR_SUBSTRING ARGS...
  local name=$1 want=$2
  shift 2
  expect "$name" 2 "$@" && out_empty "$name" && err_has "$name" "$want"
}
bad "unknown command" "unknown command 'frobnicate'" frobnicate
bad "unknown option" "unknown option --bogus" jobs --bogus
bad "flag with value" "takes no value" jobs --all=yes
bad "option without value" "needs a value" jobs --tenant
bad "job id" "positive integer" show abc
bad "job id zero" "positive integer" cancel 0
bad "missing id" "missing argument" show
bad "extra argument" "unexpected argument '2'" show 1 2
bad "limit" "--limit must be 1..1000" jobs --limit 0
bad "output" "--output must be" -o xml jobs
bad "timeout" "--timeout must be" --timeout 0 jobs
bad "submit without -f" "-f FILE is required" submit
bad "submit missing file" "cannot open" submit -f "$tmp/nope.yaml"
bad "idempotency key" "idempotency-key" submit -f "$HERE/fake_server.py" --idempotency-key "a b"
bad "tokens create no role" "--role is required" tokens create bot
bad "tokens create bad role" "--role must be" tokens create bot --role god
bad "tokens create bad name" "token name must be 1..63" tokens create a/b --role user
bad "quota set without -f" "-f TENANTS.yaml is required" quota set
bad "usage bad from" "--from: not a date" usage --from garbage
bad "usage bad date" "--from: not a date" usage --from 2026-02-30
bad "usage from after to" "--from is after --to" usage --from 2026-12-01 --to 2026-11-01
bad "server scheme" "must start with http" --server ftp://x jobs
bad "missing --config" "nope.yaml" --config "$tmp/nope.yaml" jobs
bad "missing --ca" "cannot read" --ca "$tmp/nope.pem" jobs

# ---- cannot reach (exit 6, naming the URL) ----
closed=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
expect "closed port" 6 --server "http://127.0.0.1:$closed" jobs &&
  err_has "closed port" "127.0.0.1:$closed.*refused" && out_empty "closed port"
expect "unresolvable host" 6 --server http://tessera.invalid jobs && err_has "unresolvable host" "tessera.invalid"
expect "timeout" 6 --timeout 1 show 502 && err_has "timeout" "timed out"
TESSERA_URL=http://127.0.0.1:$closed expect "closed port via env" 6 jobs

# ---- authentication (exit 5) ----
TESSERA_TOKEN="" expect "no token" 5 jobs && err_has "no token" "no token given" && out_empty "no token"
expect "wrong token" 5 --token tsk_wrong jobs && err_has "wrong token" "unauthenticated" &&
  err_has "wrong token" "from --token was not accepted"
expect "viewer drain" 5 --token tsk_viewer drain r1-n01 && err_has "viewer drain" "forbidden"
expect "bad token chars" 2 --token "a b" jobs

# ---- not found (exit 3) ----
expect "show 77" 3 show 77 && err_has "show 77" "no such job 77" && out_empty "show 77"
expect "other tenant's job" 3 --token tsk_user show 44
expect "node nope" 3 node nope && err_has "node nope" "no such node"
expect "explain 77" 3 explain 77
expect "events 77" 3 events 77
expect "revoke nope" 3 tokens revoke nope

# ---- refused (exit 4) with every field error ----
printf 'name: x\ntenant: team-a\ntasks:\n  - gpus: 99\n' >"$tmp/bad.yaml"
expect "invalid spec" 4 submit -f "$tmp/bad.yaml" && err_has "invalid spec" "the job spec is invalid" &&
  err_has "invalid spec" "^  tasks\[0\]\.gpus: must be 0\.\.16$" && err_has "invalid spec" "^  name: required$" &&
  out_empty "invalid spec"
# a message that joins the field errors is said once: a count above their lines
printf 'name: x\ntenant: team-a\ntasks:\n  - gpus: 98\n' >"$tmp/bad2.yaml"
expect "joined errors" 4 submit -f "$tmp/bad2.yaml" &&
  err_has "joined errors" "^tessera: 2 errors in the request \(400 invalid\)$" &&
  err_has "joined errors" "^  name: required$" && { if [ "$(grep -c 'must be 0..16' "$tmp/err")" = 1 ]; then pass; else fail "joined errors: said twice"; fi; }
printf 'tenants:\n  team-a:\n    wieght: 2\n' >"$tmp/bad-tenants.yaml"
expect "invalid tenants" 4 quota set -f "$tmp/bad-tenants.yaml" &&
  err_has "invalid tenants" 'tenants.team-a: unknown key "wieght"' &&
  err_has "invalid tenants" 'guaranteed.gpu\[A100\]: unknown GPU model'
expect "bad state" 4 jobs --state bogus && err_has "bad state" "state: must be one of"
expect "conflict" 4 cancel 44 && err_has "conflict" "409 conflict"
expect "rate limited" 4 node busy && err_has "rate limited" "retry after 7 s"
head -c 1100000 /dev/zero | tr '\0' 'x' >"$tmp/big.yaml"
expect "too large" 4 submit -f "$tmp/big.yaml" && err_has "too large" "413"
expect "token exists" 4 tokens create ops --role admin

# ---- server errors (exit 7) ----
expect "500" 7 show 500 && err_has "500" "the store failed \(500 internal\)"
expect "not JSON" 7 show 501 && err_has "not JSON" "unreadable answer"
expect "redirect" 7 show 503 && err_has "redirect" "redirect to 'http://elsewhere.invalid" &&
  err_has "redirect" "not followed"

# ---- jobs ----
expect "jobs" 0 jobs && out_lines "jobs" 6 &&
  out_has "jobs" "^ID +NAME +TENANT +OWNER +STATE +EXIT +GPUS +POSITION +START +SUBMITTED +REASON$" &&
  out_has "jobs" "^42 +train +team-a +alice +pending +- +16×any +1/3 +in 2[0-9]m +[0-9]+m ago +capacity$" &&
  out_has "jobs" "^43 .* 6×H100 +- +- " && out_has "jobs" "^45 .* 2×any +1/4 +unknown " &&
  out_has "jobs" "^46 .* 4×0\.25 H100-80GB \(1 GPU\) " && out_has "jobs" "^44 .*20[0-9][0-9]-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2} " &&
  out_lacks "jobs" " $"
last_ok "jobs sent the token" 'd["authorization"] == "Bearer tsk_admin"'
expect "jobs -o after" 0 jobs -o json && cp "$tmp/out" "$tmp/a.json"
expect "jobs -o before" 0 -o json jobs && same "jobs -o before = after" "$tmp/a.json"
expect "jobs --tenant" 0 jobs --tenant team-b && out_lines "jobs --tenant" 3 && out_lacks "jobs --tenant" "team-a"
last_ok "jobs query" 'd["query"] == {"tenant": ["team-b"], "order": ["newest"]}'
expect "jobs escaping" 0 jobs --owner 'a b&c=d'
last_ok "jobs escaping sent" 'd["query"]["owner"] == ["a b&c=d"]'
expect "jobs --limit 2" 0 jobs --limit 2 && out_lines "jobs --limit 2" 3 && err_has "jobs --limit 2" "--all"
expect "jobs --all" 0 jobs --limit 2 --all && out_lines "jobs --all" 6
expect "jobs --all json" 0 -o json jobs --limit 2 --all &&
  json_ok "jobs --all json" 'len(d["jobs"]) == 5 and d["next_cursor"] is None and d["jobs"][0]["id"] == 42'
expect "jobs as user" 0 --token tsk_user jobs && out_lines "jobs as user" 4
yaml_same "jobs" jobs

# ---- show, explain, events ----
expect "show 43" 0 show 43 && out_has "show 43" "^Placement: +r1-n03: GPUs 0-3$" &&
  out_has "show 43" "^ +r1-n04: GPUs 5,7$" && out_has "show 43" "^GPUs: +6×H100$" && out_has "show 43" "^Nodes: +r1-n\[03-04\]$" &&
  out_has "show 43" "^Started: +20[0-9-]+T[0-9:]+\+00:00 \([0-9]+[sm] ago\)$" && out_has "show 43" "^Ended: +-$"
expect "show 42 json" 0 show 42 -o json && json_ok "show 42 json" 'd["job"]["id"] == 42 and d["job"]["gpu_model"] is None'
yaml_same "show 44 (name 'no')" show 44
yaml_same "show 45 (name '0123', why with ': ' and ' #')" show 45
yaml_same "show 46 (non-ASCII name)" show 46
expect "explain 42" 0 explain 42 && out_has "explain 42" "^Reason: +capacity$" &&
  out_has "explain 42" "^Explanation: +needs 16 whole GPUs" && out_has "explain 42" "^Reserved: .*\(in 2[0-9]m\)$"
expect "explain 43" 0 explain 43 && out_has "explain 43" "^Reserved: +no reservation$"
yaml_same "explain" explain 42
expect "events" 0 events 42 && out_lines "events" 4 && out_has "events" "^ 3 +20[0-9-]+T[0-9:]+ +reserved +at \+25m$"
expect "events words" 0 events 43 &&
  out_has "events words" "^ 4 +20[0-9-]+T[0-9:]+ +run-ended +ran 1h 01m \(20[0-9-]+T[0-9:]+ to 20[0-9-]+T[0-9:]+\) on 4×H100, guaranteed; 4\.07 GPU-hours$" &&
  out_has "events words" "preempted +for job 7 \(team-b, guaranteed, reclaim\); signal 15, grace 30s, 0\.50 GPU-hours since the last checkpoint$"
expect "events json" 0 -o json events 42 && json_ok "events json" '[e["id"] for e in d["events"]] == [1, 2, 3]'
expect "logs" 0 logs 42 && out_lines "logs" 2 && out_has "logs" "^rank 0 stdout line 1$"
last_ok "logs asks for rank 0's stdout" 'd["path"] == "/v1/jobs/42/logs" and d["query"]["rank"] == ["0"] and d["query"]["stream"] == ["stdout"] and d["query"]["tail"] == ["65536"]'
expect "logs rank 1 stderr" 0 logs 42 --rank 1 --stderr --tail 100 && out_has "logs rank 1 stderr" "^rank 1 stderr line 1$"
expect "logs bad rank" 4 logs 42 --rank 7
bad "logs --tail 0" "--tail" logs 42 --tail 0
bad "logs --rank x" "--rank" logs 42 --rank x

# ---- job actions ----
expect "hold" 0 hold 42 && out_has "hold" "^job 42: held$"
expect "release" 0 release 42 && out_has "release" "^job 42: pending$"
expect "requeue" 0 requeue 43 && out_has "requeue" "^job 43: pending$"
expect "cancel" 0 cancel 43 -o json && json_ok "cancel" 'd["job"]["state"] == "cancelled"'
last_ok "cancel is a POST" 'd["method"] == "POST" and d["path"] == "/v1/jobs/43/cancel"'
expect "cancel again" 4 cancel 43

# ---- submit ----
printf 'name: a\ntenant: team-a\n' >"$tmp/one.yaml"
expect "submit yaml" 0 submit -f "$tmp/one.yaml" && out_has "submit yaml" "^[0-9]+$" && out_lines "submit yaml" 1 &&
  err_empty "submit yaml"
last_ok "submit yaml sent" 'd["content_type"] == "application/yaml" and len(d["idempotency_key"]) == 32'
first_key=$("$PY" -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1]))["idempotency_key"])' "$URL/_debug/last")
expect "submit new key" 0 submit -f "$tmp/one.yaml"
last_ok "submit keys differ" "d['idempotency_key'] != '$first_key'"
expect "submit with key" 0 submit -f "$tmp/one.yaml" --idempotency-key k-1 && cp "$tmp/out" "$tmp/first"
expect "submit retried" 0 submit -f "$tmp/one.yaml" --idempotency-key k-1 &&
  same "submit retried: same ids" "$tmp/first" && err_has "submit retried" "used before"
printf '[{"name": "a"}, {"name": "b"}]' >"$tmp/two.json"
expect "submit json list" 0 submit -f "$tmp/two.json" && out_lines "submit json list" 2
last_ok "submit json sent" 'd["content_type"] == "application/json"'
printf '  {"name": "a"}' >"$tmp/noext"
expect "submit sniffed" 0 submit -f "$tmp/noext"
last_ok "submit sniffed json" 'd["content_type"] == "application/json"'
cli_stdin() { timeout "$RUN_TIMEOUT_S" "$CLI" "$@" >"$tmp/out" 2>"$tmp/err" <"$tmp/one.yaml"; rc=$?; }
cli_stdin submit -f -
if [ "$rc" -eq 0 ]; then pass; else fail "submit from stdin: exit $rc"; fi
expect "submit json output" 0 -o json submit -f "$tmp/one.yaml" && json_ok "submit json output" 'd["jobs"][0]["state"] == "pending"'

# ---- nodes ----
expect "nodes" 0 nodes && out_lines "nodes" 4 &&
  out_has "nodes" "^r1-n01 +up +A100-80GB +4/8 +48.5/96 +512/1024Gi +1$" && out_has "nodes" "^v1 +up,virtual +- "
yaml_same "nodes" nodes
expect "node v1" 0 node v1 && out_has "node v1" "^MIG: +gpu 0: 3g.40gb@0 used, 1g.10gb@4 free$" &&
  out_has "node v1" "^Jobs: +45, 46$" && out_has "node v1" "^ +weird=a: b$"
yaml_same "node v1" node v1
expect "drain" 0 drain r1-n01 && out_has "drain" "^node r1-n01: drained$"
expect "resume" 0 resume r1-n01 && out_has "resume" "^node r1-n01: up$"
# a node that stays drained (its health still fails): the resume did not work
expect "resume stays drained" 4 resume r1-n02 && out_has "resume stays drained" "^node r1-n02: drained" &&
  err_has "resume stays drained" "node r1-n02 stays drained: health: xid 79: GPU has fallen off the bus"
expect "node name escaped" 3 node 'a/b c'
last_ok "node name escaped" 'd["path"] == "/v1/nodes/a%2Fb%20c"'

# ---- tenants, quota, usage ----
expect "tenants" 0 tenants && out_lines "tenants" 4 && out_has "tenants" "^team-a +- +1 +0.5 +1.25 +A100-80GB:16 +A100-80GB:20 H100:2$" &&
  out_has "tenants" "^students +- +1 +0 +0 +- +-$"
yaml_same "tenants" tenants
expect "quota" 0 quota && out_has "quota" "^TENANT +GPU MODEL +GUARANTEED +USED +USE%$" &&
  out_has "quota" "^team-a +A100-80GB +16 +20 +125%$" && out_has "quota" "^team-a +H100 +0 +2 +-$" &&
  out_has "quota" "^team-b +H100 +8 +0 +0%$" && out_has "quota" "^students +- +0 +0 +-$"
printf 'tenants:\n  team-a:\n    weight: 2\n' >"$tmp/tenants.yaml"
expect "quota set" 0 quota set -f "$tmp/tenants.yaml" && out_has "quota set" "^team-a +A100-80GB"
last_ok "quota set sent" 'd["method"] == "PUT" and d["path"] == "/v1/tenants" and d["content_type"] == "application/yaml"'
expect "quota set as user" 5 --token tsk_user quota set -f "$tmp/tenants.yaml"
expect "usage" 0 usage --from 2026-11-01 --to 2026-11-29T12:00:30Z && out_has "usage" "^total +1244.8$" &&
  out_has "usage" "^team-b +guaranteed +- +0.0$"
last_ok "usage times" 'd["query"] == {"from": ["1793491200"], "to": ["1795953630"]}'
expect "usage offset" 0 usage --from 2026-11-29T13:00+01:00
last_ok "usage offset time" 'd["query"] == {"from": ["1795953600"]}'
expect "usage relative" 0 usage --from -7d --to now
expect "usage unix" 0 usage --from 1700000000
last_ok "usage unix sent" 'd["query"] == {"from": ["1700000000"]}'
yaml_same "usage" usage

# ---- secrets (docs/secrets.md): values from stdin or a file, never shown ----
expect "secrets" 0 secrets && out_lines "secrets" 3 &&
  out_has "secrets" "^WANDB_API_KEY +user +alice +3h ago$" && out_has "secrets" "^HF_TOKEN +tenant +- +"
printf 'v4lue\n' >"$tmp/secret.in"
cli_secret() { timeout "$RUN_TIMEOUT_S" "$CLI" "$@" >"$tmp/out" 2>"$tmp/err" <"$tmp/secret.in"; rc=$?; }
cli_secret secrets set API_KEY
if [ "$rc" -eq 0 ]; then pass; else fail "secrets set from stdin: exit $rc"; fi
out_has "secrets set" "^secret API_KEY created \(scope user, tenant team-a\)$" && out_lacks "secrets set" "v4lue"
last_ok "secrets set sent" 'd["method"] == "PUT" and d["path"] == "/v1/secrets/API_KEY" and json.loads(d["body"]) == {"value": "v4lue"}'
printf 'line1\nline2\n' >"$tmp/secret.file"
expect "secrets set --from-file" 0 secrets set HF_TOKEN --scope tenant --from-file "$tmp/secret.file" &&
  out_has "secrets set --from-file" "^secret HF_TOKEN replaced \(scope tenant"
last_ok "secrets set file sent" 'json.loads(d["body"]) == {"value": "line1\nline2\n", "scope": "tenant"}'
bad "secrets set bad scope" "--scope must be user or tenant" secrets set X --scope team
bad "secrets set no file" "cannot open" secrets set X --from-file "$tmp/none"
head -c 16385 /dev/zero | tr '\0' a >"$tmp/secret.big"
bad "secrets set too long" "at most 16384" secrets set X --from-file "$tmp/secret.big"
expect "secrets rm" 0 secrets rm API_KEY --scope tenant && out_has "secrets rm" "^secret API_KEY deleted$"
last_ok "secrets rm sent" 'd["method"] == "DELETE" and d["path"] == "/v1/secrets/API_KEY" and d["query"] == {"scope": ["tenant"]}'
expect "secrets rm nope" 3 secrets rm NOPE
expect "secrets events" 0 secrets events --tenant team-a && out_lines "secrets events" 2 &&
  out_has "secrets events" " secret-set +team-a +user +alice +K +alice$"
last_ok "secrets events sent" 'd["path"] == "/v1/secrets/events" and d["query"] == {"tenant": ["team-a"]}'
expect "secrets json" 0 -o json secrets && json_ok "secrets json" 'len(d["secrets"]) == 2 and "value" not in d["secrets"][0]'

# ---- tokens ----
expect "tokens" 0 tokens && out_lines "tokens" 3 &&
  out_has "tokens" "^ci +user +team-a +ci +2001 +1h ago +in 2[34]h +[0-9]+m ago$" &&
  out_has "tokens" "^ops +admin +- +- +- +20[0-9-]+T[0-9:]+ +never +no$"
expect "tokens create mapped" 0 tokens create svc --role user --tenant team-a --unix-user svc \
  --uid 2005 --expires 90d &&
  last_ok "tokens create mapped sent" 'json.loads(d["body"]) == {"name": "svc", "role": "user", "tenant": "team-a", "expires": "90d", "unix_user": "svc", "uid": 2005}'
bad "tokens create uid alone" "--unix-user and --uid go together" tokens create x --role user --uid 5
bad "tokens create bad uid" "--uid must be an integer" tokens create x --role user --unix-user x --uid -3
yaml_same "tokens" tokens
expect "tokens create" 0 tokens create bot --role user --tenant team-a &&
  out_has "tokens create" "^tsk_bot_s3cr3t$" && out_lines "tokens create" 1 && err_has "tokens create" "shown only"
expect "tokens create admin" 0 tokens create root2 --role admin -o json &&
  json_ok "tokens create admin" 'd["token"]["secret"] == "tsk_root2_s3cr3t" and d["token"]["tenant"] is None'
expect "tokens revoke" 0 tokens revoke ci && out_has "tokens revoke" "^token ci revoked$"
last_ok "tokens revoke sent" 'd["method"] == "DELETE" and d["path"] == "/v1/tokens/ci"'
expect "tokens revoke json" 0 -o json tokens revoke bot && out_empty "tokens revoke json"

# ---- settings: flags > environment > config file ----
mkdir -p "$tmp/xdg/tessera" "$HOME/.config/tessera"
printf 'server: %s\ntoken: tsk_admin\n' "$URL" >"$tmp/cfg.yaml"
chmod 600 "$tmp/cfg.yaml"
env -u TESSERA_URL -u TESSERA_TOKEN "$CLI" --config "$tmp/cfg.yaml" nodes >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ]; then pass; else fail "config file: exit $rc"; fi
chmod 644 "$tmp/cfg.yaml"
env -u TESSERA_URL -u TESSERA_TOKEN "$CLI" --config "$tmp/cfg.yaml" nodes >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ]; then pass; else fail "config 644: exit $rc"; fi
err_has "config 644 warns" "readable by everyone; run: chmod 600"
cp "$tmp/cfg.yaml" "$tmp/xdg/tessera/config.yaml"
chmod 600 "$tmp/xdg/tessera/config.yaml"
env -u TESSERA_URL -u TESSERA_TOKEN XDG_CONFIG_HOME="$tmp/xdg" "$CLI" nodes >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ]; then pass; else fail "XDG config: exit $rc"; fi
printf 'server: %s\ntoken: tsk_wrong\n' "$URL" >"$HOME/.config/tessera/config.yaml"
chmod 600 "$HOME/.config/tessera/config.yaml"
env -u TESSERA_URL -u TESSERA_TOKEN "$CLI" nodes >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 5 ] && grep -q "from the config file" "$tmp/err"; then pass; else fail "home config token used: exit $rc"; fi
expect "env beats config" 0 nodes
TESSERA_TOKEN=tsk_wrong expect "flag beats env" 0 --token tsk_admin nodes
TESSERA_URL=http://127.0.0.1:$closed expect "flag beats env url" 0 --server "$URL" nodes
printf 'server: %s\ntokn: x\n' "$URL" >"$tmp/typo.yaml"
bad "config unknown key" "typo.yaml:2: top level: unknown key \"tokn\"" --config "$tmp/typo.yaml" nodes
printf 'server: [a\n' >"$tmp/broken.yaml"
bad "config malformed" "broken.yaml:" --config "$tmp/broken.yaml" nodes

# ---- several controllers: a leader and its standbys (docs/ha.md) ----
# start_standby PORT_FILE LEADER_URL|-|@FILE: a controller that answers 503 standby
start_standby() {
  local pf=$1 waited=0
  "$PY" "$HERE/standby_server.py" "$pf" "$2" 2>>"$tmp/server.log" &
  server_pids+=($!)
  while [ ! -s "$pf" ]; do
    sleep 0.1
    waited=$((waited + 1))
    if [ "$waited" -ge $((SERVER_START_S * 10)) ]; then
      echo "FAIL: standby server did not start"; cat "$tmp/server.log"; exit 1
    fi
  done
}
hits() { "$PY" -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1] + "/_debug/hits", timeout=10))["hits"])' "$1"; }
# hits_are NAME URL N: the standby at URL was sent N requests so far
hits_are() {
  local h
  h=$(hits "$2")
  if [ "$h" = "$3" ]; then pass; else fail "$1: the standby was sent $h requests, expected $3"; fi
}
start_standby "$tmp/sb-port" "$URL"          # names the leader
SBL=http://127.0.0.1:$(cat "$tmp/sb-port")
start_standby "$tmp/sb0-port" -              # names none
SB0=http://127.0.0.1:$(cat "$tmp/sb0-port")
: >"$tmp/a-leader"
: >"$tmp/b-leader"
start_standby "$tmp/sba-port" "@$tmp/a-leader"
SBA=http://127.0.0.1:$(cat "$tmp/sba-port")
start_standby "$tmp/sbb-port" "@$tmp/b-leader"
SBB=http://127.0.0.1:$(cat "$tmp/sbb-port")
echo "$SBB" >"$tmp/a-leader"                 # two standbys naming each other
echo "$SBA" >"$tmp/b-leader"
DEAD=http://127.0.0.1:$closed

TESSERA_URL=$SB0,$URL expect "list: a standby, then the leader" 0 nodes &&
  out_lines "list: a standby, then the leader" 4 && err_empty "list: a standby, then the leader"
hits_are "list: a standby, then the leader" "$SB0" 1
TESSERA_URL=$DEAD,$URL expect "list: a dead URL, then the leader" 0 nodes &&
  out_lines "list: a dead URL, then the leader" 4 && err_empty "list: a dead URL, then the leader"
TESSERA_URL=$SBL expect "the leader a standby names" 0 -o json show 42 &&
  json_ok "the leader a standby names" 'd["job"]["id"] == 42'
hits_are "the leader a standby names" "$SBL" 1
# the first real answer is the answer, even an error: not retried elsewhere
TESSERA_URL=$URL,$SB0 expect "a 404 is an answer" 3 show 77 && err_has "a 404 is an answer" "no such job 77"
TESSERA_URL=$URL,$SB0 expect "a 500 is an answer" 7 show 500
hits_are "a 500 is an answer" "$SB0" 1
# pages: the controller that answered is asked first for the next page
TESSERA_URL=$SB0,$URL expect "list: pages" 0 -o json jobs --limit 2 --all &&
  json_ok "list: pages" 'len(d["jobs"]) > 4 and d["next_cursor"] is None'
hits_are "list: pages" "$SB0" 2
# submissions follow too, their Idempotency-Key with them
TESSERA_URL=$SB0,$DEAD,$URL expect "list: submit" 0 sbatch "$HERE/../data/sbatch/02-minimal.sh" &&
  out_has "list: submit" "^[0-9]+$"
last_ok "list: submit sent" 'd["method"] == "POST" and len(d["idempotency_key"]) == 32'
# none answers: the last try's error, then what the others came to
TESSERA_URL=$SB0,$DEAD expect "list: none answers" 6 nodes &&
  err_has "list: none answers" "cannot reach $DEAD" &&
  err_has "list: none answers" "tried before: $SB0 \(a standby\)" && out_empty "list: none answers"
TESSERA_URL=$DEAD,$SB0 expect "list: only a standby" 7 nodes &&
  err_has "list: only a standby" "this controller is a standby \(503 standby\)" &&
  err_has "list: only a standby" "tried before: $DEAD \(no answer\)"
# bounded: two standbys naming each other are each asked once
TESSERA_URL=$SBA,$SBB expect "standbys naming each other" 7 nodes
hits_are "standbys naming each other (a)" "$SBA" 1
hits_are "standbys naming each other (b)" "$SBB" 1
TESSERA_URL=$SBA expect "a hint to a standby is one hop" 7 nodes
hits_are "a hint to a standby is one hop (a)" "$SBA" 2
hits_are "a hint to a standby is one hop (b)" "$SBB" 2
# lists from --server and from the config file
expect "--server list" 0 --server "$DEAD,$URL/" nodes && out_lines "--server list" 4
printf 'server: "%s,%s"\ntoken: tsk_admin\n' "$SB0" "$URL" >"$tmp/list.yaml"
chmod 600 "$tmp/list.yaml"
env -u TESSERA_URL -u TESSERA_TOKEN "$CLI" --config "$tmp/list.yaml" nodes >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ]; then pass; else fail "config file list: exit $rc"; fi
# each entry checked, the bad one named
TESSERA_URL=$URL,ftp://x bad "list: bad scheme" "server URL 2 must start with http:// or https://, got 'ftp://x' \(from \\\$TESSERA_URL\)" nodes
TESSERA_URL=$URL, bad "list: empty entry" "server URL 2 is empty" nodes
TESSERA_URL="$URL, $SBL" bad "list: blank" "server URL 2 must not hold blanks" nodes
TESSERA_URL=$URL,$SBL,$URL/ bad "list: repeat" "server URL 3 '$URL' repeats URL 1" nodes
nine=$URL
for i in 1 2 3 4 5 6 7 8; do nine=$nine,http://127.0.0.1:$i; done
TESSERA_URL=$nine bad "list: more than 8" "more than 8 server URLs" nodes
eight=$URL
for i in 1 2 3 4 5 6 7; do eight=$eight,http://127.0.0.1:$i; done
TESSERA_URL=$eight expect "list: 8 URLs" 0 nodes

# ---- output that cannot be written ----
if [ -w /dev/full ]; then
  timeout "$RUN_TIMEOUT_S" "$CLI" jobs >/dev/full 2>"$tmp/err"
  rc=$?
  if [ "$rc" -eq 1 ]; then pass; else fail "stdout /dev/full: exit $rc, expected 1"; fi
fi

# ---- sbatch: Slurm batch scripts (docs/slurm.md) ----
SB=$HERE/../data/sbatch
expect "sbatch --help" 0 sbatch --help && out_has "sbatch --help" "^usage: tessera sbatch"
expect "sbatch dry-run" 0 sbatch --dry-run --slurm-map "$SB/map.txt" "$SB/01-basic.sh" &&
  json_ok "sbatch dry-run" 'd["spec"]["tasks"][0] == {"count": 8, "gpus": 2, "cpu_milli": 6000, "memory_mib": 16384} and d["spec"]["tenant"] == "research" and d["interpretation"]["nodes"] == 2 and "TESSERA_TOKEN" not in d["spec"]["env"]'
# the command line overrides the script; -o here is sbatch's --output
expect "sbatch override" 0 sbatch --dry-run -N 1 --gpus-per-node=4 -t 5 -o "run-%j.out" "$SB/01-basic.sh" a1 a2 &&
  json_ok "sbatch override" 'd["interpretation"]["gpus"] == 4 and d["spec"]["time_limit"] == 300 and d["spec"]["command"][-2:] == ["a1", "a2"] and "run-${SLURM_JOB_ID}.out" in d["spec"]["command"][2]'
expect "sbatch tessera -o" 0 -o yaml sbatch --dry-run "$SB/02-minimal.sh" && out_has "sbatch tessera -o" "^spec:"
# --wrap: the command as a sh script named wrap, as sbatch --wrap
expect "sbatch --wrap" 0 sbatch --dry-run --tenant research -t 5 --wrap="echo hi" &&
  json_ok "sbatch --wrap" 'd["spec"]["command"][:3] == ["/bin/sh", "-c", "#!/bin/sh\necho hi\n"] and d["spec"]["name"] == "wrap" and d["spec"]["time_limit"] == 300'
expect "sbatch --wrap and a script" 2 sbatch --dry-run --wrap="echo hi" "$SB/02-minimal.sh" &&
  err_has "sbatch --wrap and a script" "give a script or --wrap, not both"
expect "sbatch --tenant" 0 sbatch --dry-run --tenant team-b "$SB/02-minimal.sh" &&
  json_ok "sbatch --tenant" 'd["spec"]["tenant"] == "team-b"'
expect "sbatch warning" 0 sbatch --dry-run "$SB/33-warn-safe.sh" && err_has "sbatch warning" "warning: .*--requeue: ignored"
expect "sbatch submit" 0 sbatch "$SB/01-basic.sh" && out_has "sbatch submit" "^[0-9]+$" && out_lines "sbatch submit" 1
last_ok "sbatch sent" 'd["method"] == "POST" and d["path"] == "/v1/jobs" and d["content_type"] == "application/json" and len(d["idempotency_key"]) == 32'
expect "submit SCRIPT" 0 submit "$SB/04-gres.sh" && out_has "submit SCRIPT" "^[0-9]+$"
last_ok "submit SCRIPT sent" 'd["content_type"] == "application/json"'
expect "submit SCRIPT options" 0 submit --dry-run -n 2 "$SB/04-gres.sh" &&
  json_ok "submit SCRIPT options" 'd["spec"]["tasks"][0]["count"] == 2'
TESSERA_SLURM_MAP=$SB/map.txt expect "sbatch map from env" 0 sbatch --dry-run "$SB/22-qos-mapped.sh" &&
  json_ok "sbatch map from env" 'd["spec"]["tier"] == "guaranteed"'
bad "sbatch no script" "missing the script" sbatch --dry-run
bad "sbatch missing file" "cannot open" sbatch "$tmp/nope.sh"
expect "sbatch dependency" 0 sbatch --dry-run "$SB/30-dependency.sh" &&
  json_ok "sbatch dependency" 'd["spec"]["dependency"] == "afterok:123:124,afterany:125"'
bad "sbatch dependency delay" "--dependency: .*a delay after '\+' is not supported" sbatch --dry-run -d afterok:12+30 "$SB/02-minimal.sh"
bad "sbatch refused" "--constraint: '.' at byte 4" sbatch "$SB/32-constraint-bad.sh"
bad "sbatch unknown option" "--frobnicate: unknown option" sbatch --frobnicate "$SB/02-minimal.sh"
bad "sbatch bad map" "slurm map:[0-9]+: kind must be" sbatch --slurm-map "$HERE/cli.sh" "$SB/02-minimal.sh"
printf 'echo not a script\n' >"$tmp/plain.sh"
bad "sbatch no shebang" "first line must be #!" sbatch "$tmp/plain.sh"
TESSERA_TOKEN=tsk_viewer expect "sbatch forbidden" 5 sbatch "$SB/02-minimal.sh" &&
  out_empty "sbatch forbidden" && err_has "sbatch forbidden" "viewer"

# ---- https: certificates verified, --ca trusts a private CA ----
if command -v openssl >/dev/null &&
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null; then
  start_server "$tmp/tls-port" --tls "$tmp/cert.pem" "$tmp/key.pem"
  TLS_URL=https://127.0.0.1:$(cat "$tmp/tls-port")
  expect "https untrusted" 6 --server "$TLS_URL" nodes && err_has "https untrusted" "TLS failed.*--ca"
  expect "https --ca" 0 --server "$TLS_URL" --ca "$tmp/cert.pem" nodes && out_lines "https --ca" 4
  printf 'not a certificate\n' >"$tmp/bad.pem"
  bad "https bad --ca" "not a usable CA certificate" --server "$TLS_URL" --ca "$tmp/bad.pem" nodes
  printf 'server: %s\ntoken: tsk_admin\nca: cert.pem\n' "$TLS_URL" >"$tmp/tls.yaml"
  chmod 600 "$tmp/tls.yaml"
  expect "https ca in config" 0 --config "$tmp/tls.yaml" --server "$TLS_URL" nodes
else
  echo "note: openssl missing, https checks skipped"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
