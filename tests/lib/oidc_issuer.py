"""oidc_issuer.py - an OpenID Connect issuer for tests: its own RSA (RS256)
and P-256 (ES256) keys made with the openssl command (no Python crypto
package needed), its JSON Web Key Set served over HTTP on loopback, and ID
tokens signed with those keys or made wrong on purpose.

    iss = Issuer(tmpdir)            # keys "k1" (RSA) and "e1" (EC)
    iss.serve()                     # iss.jwks_url, iss.url
    jwt = iss.token({"sub": "alice", "tenant": "t"})
    iss.add_key("k2")               # a rotated key, published on next fetch
    iss.stop()
"""
import base64
import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

AUDIENCE = "tessera"


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _openssl(*args, data=None):
    return subprocess.run(["openssl", *args], input=data, check=True,
                          capture_output=True).stdout


def _der_ints(der):
    """The two INTEGERs of a DER ECDSA-Sig-Value (r, s) as bytes."""
    assert der[0] == 0x30
    i = 2 if der[1] < 0x80 else 2 + (der[1] & 0x7F)
    out = []
    for _ in range(2):
        assert der[i] == 0x02
        n = der[i + 1]
        out.append(der[i + 2:i + 2 + n])
        i += 2 + n
    return out


class Key:
    def __init__(self, d, kid, kind):
        self.kid, self.kind = kid, kind
        self.pem = os.path.join(d, f"{kid}.pem")
        if kind == "RSA":
            _openssl("genrsa", "-out", self.pem, "2048")
            mod = _openssl("rsa", "-in", self.pem, "-noout", "-modulus").decode()
            n = bytes.fromhex(mod.strip().split("=", 1)[1])
            self.jwk = {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                        "n": b64url(n), "e": b64url((65537).to_bytes(3, "big"))}
        else:
            _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", self.pem)
            pub = _openssl("ec", "-in", self.pem, "-pubout", "-outform", "DER")
            pt = pub[-65:]
            assert pt[0] == 4
            self.jwk = {"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                        "x": b64url(pt[1:33]), "y": b64url(pt[33:])}

    def sign(self, data):
        sig = _openssl("dgst", "-sha256", "-sign", self.pem, data=data)
        if self.kind == "RSA":
            return sig
        r, s = _der_ints(sig)
        return r.lstrip(b"\0").rjust(32, b"\0") + s.lstrip(b"\0").rjust(32, b"\0")


class Issuer:
    def __init__(self, d):
        self.dir = d
        self.keys = {"k1": Key(d, "k1", "RSA"), "e1": Key(d, "e1", "EC")}
        self.published = ["k1", "e1"]
        self.url = None
        self.fetches = 0
        self._srv = None

    def add_key(self, kid, kind="RSA", publish=True):
        self.keys[kid] = Key(self.dir, kid, kind)
        if publish:
            self.published.append(kid)
        return self.keys[kid]

    def jwks(self):
        return {"keys": [self.keys[k].jwk for k in self.published]}

    def write_jwks(self, path):
        with open(path, "w") as f:
            json.dump(self.jwks(), f)

    def claims(self, **kw):
        now = int(time.time())
        c = {"iss": self.url or "https://issuer.test", "aud": AUDIENCE, "iat": now,
             "exp": now + 600}
        c.update(kw)
        return c

    def token(self, claims, kid="k1", alg=None, tamper=False, header=None):
        key = self.keys[kid]
        h = {"alg": alg or key.jwk["alg"], "typ": "JWT", "kid": kid}
        h.update(header or {})
        signing = (b64url(json.dumps(h).encode()) + "." +
                   b64url(json.dumps(claims).encode())).encode()
        sig = bytearray(key.sign(signing))
        if tamper:
            sig[len(sig) // 2] ^= 0x01
        return signing.decode() + "." + b64url(bytes(sig))

    def serve(self):
        issuer = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/jwks.json":
                    issuer.fetches += 1
                    body = json.dumps(issuer.jwks()).encode()
                elif self.path == "/.well-known/openid-configuration":
                    body = json.dumps({"issuer": issuer.url,
                                       "jwks_uri": issuer.jwks_url}).encode()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        port = self._srv.server_address[1]
        self.url = f"http://127.0.0.1:{port}"
        self.jwks_url = self.url + "/jwks.json"
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    def stop(self):
        if self._srv:
            self._srv.shutdown()
            self._srv.server_close()
