#!/usr/bin/env python3
"""The Python task library (python/tessera_task) against the protocol the
agent reads (docs/agent-tasks.md): a real checkpoint signal only sets a flag
the loop sees between steps (and when it came); the acknowledgement appears
whole under its name; step times are one parseable line each; the variables
are read with their limits; outside Tessera every call is a harmless no-op.
Also checks that the C header and this module export the same API.

    task_lib_test.py
"""
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
import tessera_task as tt  # noqa: E402

VARS = ("TESSERA_CHECKPOINT_DONE", "TESSERA_STEP_FILE", "TESSERA_RESTARTS",
        "TESSERA_CHECKPOINT_DIR")


class TaskLib(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tessera-task-py-")
        for v in VARS:
            os.environ.pop(v, None)
        tt.reset()

    def tearDown(self):
        tt.reset()
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)
        subprocess.run(["rm", "-rf", self.dir], check=True)

    def test_signal_sets_flag(self):
        tt.install()
        self.assertFalse(tt.checkpoint_requested())
        self.assertIsNone(tt.requested_at())
        t0 = time.time()
        os.kill(os.getpid(), signal.SIGUSR1)
        for _ in range(100):  # the handler runs at the next bytecode boundary
            if tt.checkpoint_requested():
                break
            time.sleep(0.001)
        self.assertTrue(tt.checkpoint_requested())
        self.assertTrue(t0 <= tt.requested_at() <= time.time())
        tt.reset()
        tt.install(signal.SIGUSR2)
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.01)
        self.assertTrue(tt.checkpoint_requested())
        with self.assertRaisesRegex(ValueError, "signum: SIGKILL"):
            tt.install(signal.SIGKILL)

    def test_signal_without_install_kills(self):
        # the reason install() must come first: SIGUSR1's default action
        p = subprocess.run([sys.executable, "-c", "import os,signal,time; "
                            "os.kill(os.getpid(), signal.SIGUSR1); time.sleep(5)"])
        self.assertEqual(p.returncode, -signal.SIGUSR1)

    def test_checkpoint_done(self):
        self.assertFalse(tt.checkpoint_done())
        ack = os.path.join(self.dir, "ack")
        os.environ["TESSERA_CHECKPOINT_DONE"] = ack
        self.assertTrue(tt.checkpoint_done())
        self.assertTrue(os.path.getsize(ack) > 0)
        self.assertEqual(os.listdir(self.dir), ["ack"])
        os.environ["TESSERA_CHECKPOINT_DONE"] = "/nonexistent-tessera/ack"
        with self.assertRaises(FileNotFoundError):
            tt.checkpoint_done()
        os.environ["TESSERA_CHECKPOINT_DONE"] = "/" + "a" * 5000
        with self.assertRaisesRegex(ValueError, "TESSERA_CHECKPOINT_DONE: longer than 4095"):
            tt.checkpoint_done()

    def test_report_step(self):
        self.assertFalse(tt.report_step(0.5))
        path = os.path.join(self.dir, "steps")
        os.environ["TESSERA_STEP_FILE"] = path
        self.assertTrue(tt.report_step(0.412))
        self.assertTrue(tt.report_step(1.5))
        self.assertTrue(tt.report_step(1e-6))
        for bad in (0, -1, math.nan, math.inf, "x"):
            with self.assertRaises(ValueError):
                tt.report_step(bad)
        self.assertEqual(open(path).read(), "0.412000\n1.500000\n0.000001\n")

    def test_restarts_and_dir(self):
        self.assertEqual(tt.restarts(), 0)
        self.assertIsNone(tt.checkpoint_dir())
        os.environ["TESSERA_RESTARTS"] = "3"
        self.assertEqual(tt.restarts(), 3)
        os.environ["TESSERA_RESTARTS"] = "1000000"
        self.assertEqual(tt.restarts(), 1000000)
        for bad in ("-1", "2x", "1000001", " 1", "\u0663"):
            os.environ["TESSERA_RESTARTS"] = bad
            with self.assertRaisesRegex(ValueError, "TESSERA_RESTARTS"):
                tt.restarts()
        os.environ["TESSERA_CHECKPOINT_DIR"] = "/shared/ckpt/team-a/42"
        self.assertEqual(tt.checkpoint_dir(), "/shared/ckpt/team-a/42")
        os.environ["TESSERA_CHECKPOINT_DIR"] = ""
        self.assertIsNone(tt.checkpoint_dir())

    def test_same_api_as_c(self):
        with open(os.path.join(ROOT, "include", "tessera", "task.h")) as f:
            hdr = f.read()
        c_api = set(re.findall(r"^\S.*\btessera_task_(\w+)\([^)]*\);", hdr, re.M))
        # C's init is Python's install; both have reset for tests
        self.assertEqual(c_api - {"init"}, set(tt.__all__) - {"install", "requested_at"})


if __name__ == "__main__":
    unittest.main()
