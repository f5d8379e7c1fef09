"""The CLI on a real local terminal, for the scenarios that drive an
interactive session (tessera run, srun --pty) as a user at a keyboard would."""
import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time

from harness import check


def cli_env(c, token=None):
    return dict(os.environ, TESSERA_URL=c.url, TESSERA_TOKEN=token or c.admin, HOME=c.tmp,
                XDG_CONFIG_HOME=c.path("xdg"))


class Term:
    """The CLI on a real local terminal (a PTY whose master the test holds)."""

    def __init__(self, c, args, rows=30, cols=100):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the CLI, its terminal sized first
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execve(c.bins["cli"], [c.bins["cli"], *args], dict(cli_env(c), TERM="xterm-probe"))
        self.seen = b""
        self.status = None

    def send(self, text):
        os.write(self.fd, text.encode() if isinstance(text, str) else text)

    def expect(self, what, timeout=15.0):
        """True once what appeared in the output since the last expect."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if what.encode() in self.seen:
                i = self.seen.index(what.encode()) + len(what)
                self.seen = self.seen[i:]
                return True
            r, _, _ = select.select([self.fd], [], [], 0.1)
            if r:
                try:
                    b = os.read(self.fd, 4096)
                except OSError:
                    b = b""
                if not b:
                    break
                self.seen += b
        print(f"  expected {what!r}; terminal shows {self.seen[-400:]!r}")
        return False

    def resize(self, rows, cols):
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def wait(self, timeout=30.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                r, _, _ = select.select([self.fd], [], [], 0.1)
                if r:
                    self.seen += os.read(self.fd, 4096)
            except OSError:
                pass
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
                return self.status
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        return None

    def check_size_ctrl_c_exit(self, where, rows=30, cols=100):
        """On a shell in the session that started with rows x cols: the
        window's size and a change of it reach `stty size` (where: "the
        remote PTY", ...), ^C stops the foreground command and the shell goes
        on, and `exit 7` ends the CLI with status 7."""
        self.send("stty size\n")
        check(self.expect(f"{rows} {cols}"), f"{where} starts with the local window's size")
        self.resize(40, 132)
        time.sleep(0.5)
        self.send("stty size\n")
        check(self.expect("40 132"), f"a local window change reaches {where}")
        self.send("sleep 30; echo not-interrupted\n")
        time.sleep(1.0)
        t0 = time.time()
        self.send("\x03")
        self.send("echo after-ctrl-c\n")
        check(self.expect("after-ctrl-c", 10) and time.time() - t0 < 10,
              f"^C stops the sleep on {where} and the shell goes on")
        check(b"not-interrupted" not in self.seen, "the interrupted list did not go on")
        self.send("exit 7\n")
        check(self.wait(60) == 7, f"tessera run exits with the command's status 7: {self.status}")
