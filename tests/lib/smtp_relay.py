"""smtp_relay.py - a small SMTP relay on loopback for the tests of mail
(tests/promises/mail_test.py, mail_tls_test.py): just enough of RFC 5321
for one client (EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT) and, given a
certificate, STARTTLS (RFC 3207), which it then requires before MAIL.

    r = Relay(tls=(certfile, keyfile))   # or Relay() without TLS
    ... r.port, r.mails (mail from, [rcpt to], text, over TLS), r.state ...
State (under r.lock): "refuse" > 0 answers MAIL with 451 (then counts down),
"hang" sends no greeting at all, "tries" counts MAIL commands."""
import socketserver
import ssl
import threading
import time


class _Smtp(socketserver.StreamRequestHandler):
    timeout = 30

    def say(self, line):
        self.wfile.write(line.encode() + b"\r\n")
        self.wfile.flush()

    def handle(self):
        srv = self.server
        with srv.lock:
            hang = srv.state["hang"]
        if hang:
            time.sleep(20)
            return
        self.say("220 relay.test ESMTP")
        sender, rcpts, tls = None, [], False
        while True:
            raw = self.rfile.readline()
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip("\r\n")
            verb = line[:8].upper() if line[:8].upper() == "STARTTLS" else line[:4].upper()
            if verb in ("EHLO", "HELO"):
                if verb == "HELO":
                    self.say("250 relay.test")
                    continue
                self.say("250-relay.test")
                if srv.tls_ctx and not tls:
                    self.say("250-STARTTLS")
                self.say("250 8BITMIME")
            elif verb == "STARTTLS" and srv.tls_ctx and not tls:
                self.say("220 go ahead")
                self.connection = srv.tls_ctx.wrap_socket(self.connection, server_side=True)
                self.rfile = self.connection.makefile("rb")
                self.wfile = self.connection.makefile("wb")
                tls, sender, rcpts = True, None, []
            elif verb == "MAIL":
                if srv.tls_ctx and not tls:
                    self.say("530 5.7.0 must issue a STARTTLS command first")
                    continue
                with srv.lock:
                    srv.state["tries"] += 1  # one try of a message
                    refuse = srv.state["refuse"] > 0
                    if refuse:
                        srv.state["refuse"] -= 1
                if refuse:
                    self.say("451 4.3.0 try again later")
                    continue
                sender, rcpts = line.split(":", 1)[1].strip(), []
                self.say("250 OK")
            elif verb == "RCPT":
                rcpts.append(line.split(":", 1)[1].strip())
                self.say("250 OK")
            elif verb == "DATA":
                self.say("354 end with <CRLF>.<CRLF>")
                body = []
                while True:
                    d = self.rfile.readline()
                    if not d or d in (b".\r\n", b".\n"):
                        break
                    body.append(d.decode(errors="replace"))
                with srv.lock:
                    srv.mails.append((sender, rcpts, "".join(body), tls))
                self.say("250 OK queued")
            elif verb == "QUIT":
                self.say("221 bye")
                return
            elif verb in ("RSET", "NOOP"):
                self.say("250 OK")
            else:
                self.say("502 not implemented")


class Relay(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, tls=None):
        super().__init__(("127.0.0.1", 0), _Smtp)
        self.lock = threading.Lock()
        self.state = {"refuse": 0, "hang": False, "tries": 0}
        self.mails = []
        self.tls_ctx = None
        if tls:
            self.tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls_ctx.load_cert_chain(*tls)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()
