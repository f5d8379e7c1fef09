#!/usr/bin/env python3
"""The agent's discovery and health in the OpenAPI document (written from the
codec's member tables, src/proto) say what docs/agent-protocol.schema.json
says of them: the same members, types, ranges, enums and required members.
Where the two may differ by design: the OpenAPI objects are open (the
decoders ignore members they do not know), an enum also names its type, a
GPU's model may be null (older agents sent it so), and descriptions."""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
defs = json.load(open(os.path.join(ROOT, "docs", "agent-protocol.schema.json")))["$defs"]
api = json.loads(subprocess.run([sys.argv[1], "--openapi"], check=True,
                                capture_output=True, text=True).stdout)["components"]["schemas"]


def resolved(x):
    """The doc's schema with its $refs in place and what may differ left out."""
    if isinstance(x, dict):
        if "$ref" in x:
            return resolved(defs[x["$ref"].rsplit("/", 1)[1]])
        return {k: resolved(v) for k, v in x.items()
                if k not in ("description", "additionalProperties")}
    return [resolved(v) for v in x] if isinstance(x, list) else x


def norm(x):
    if isinstance(x, dict):
        y = {k: norm(v) for k, v in x.items()}
        if "enum" in y:
            y.pop("type", None)
        if y.get("type") == ["string", "null"]:
            y["type"] = "string"
        if "required" in y:
            y["required"] = sorted(y["required"])
        return y
    return [norm(v) for v in x] if isinstance(x, list) else x


bad = 0
for doc, comp in (("discovery", "Discovery"), ("health", "NodeHealth")):
    want, got = norm(resolved(defs[doc])), norm(api.get(comp, {}))
    if want != got:
        bad += 1
        print(f"FAIL: components/schemas/{comp} differs from the agent schema's $defs/{doc}:\n"
              f"  doc:     {json.dumps(want, sort_keys=True)}\n"
              f"  openapi: {json.dumps(got, sort_keys=True)}")
    else:
        print(f"ok: components/schemas/{comp} says what $defs/{doc} says")
    ref = api["AgentMessage"]["properties"][doc]
    if ref != {"$ref": f"#/components/schemas/{comp}"}:
        bad += 1
        print(f"FAIL: AgentMessage.{doc} is not the codec's {comp}: {ref}")
sys.exit(1 if bad else 0)
