"""tessera_task - the task side of the Tessera agent's contract, for Python
training programs (docs/task-library.md; the protocol is docs/agent-tasks.md).

A task learns that it must checkpoint (the job's checkpoint signal, SIGUSR1 by
default), acknowledges the checkpoint once it is durable, reports its step
times for straggler detection and reads how often it was restarted and where
its checkpoints live. Standard library only; the same API as the C header
include/tessera/task.h.

    import tessera_task as tt
    tt.install()                      # first thing: the handler only sets a flag
    ...
    if tt.checkpoint_requested():     # between steps
        save(tt.checkpoint_dir()); tt.checkpoint_done(); sys.exit(0)

Outside Tessera (the TESSERA_* variables unset) everything is harmless:
checkpoint_done and report_step do nothing, restarts() is 0 and
checkpoint_dir() is None.
"""
import math
import os
import signal
import time

__all__ = ["install", "checkpoint_requested", "checkpoint_done", "report_step", "restarts",
           "checkpoint_dir", "requested_at", "reset"]

#: longest path accepted in TESSERA_CHECKPOINT_DONE / TESSERA_STEP_FILE
PATH_MAX = 4096
#: largest TESSERA_RESTARTS accepted
RESTARTS_MAX = 1000000

_flag = False
_at = None
_step_file = None


def _on_signal(signum, frame):
    # Python runs this in the main thread between bytecodes; it only notes
    # that the signal came, and when
    global _flag, _at
    if not _flag:
        _at = time.time()
    _flag = True


def install(signum=signal.SIGUSR1):
    """Installs the checkpoint-signal handler (signum: the job's
    checkpoint.signal, SIGUSR1 by default). Call it first thing: until it
    runs the signal's default action (for SIGUSR1: terminate) applies.
    Must be called from the main thread (a rule of the signal module)."""
    if signum in (signal.SIGKILL, signal.SIGSTOP):
        raise ValueError(f"signum: {signal.Signals(signum).name} cannot be caught")
    signal.signal(signum, _on_signal)


def checkpoint_requested():
    """True once the checkpoint signal arrived: check it between steps."""
    return _flag


def requested_at():
    """time.time() when the checkpoint signal arrived, or None."""
    return _at


def _path(name):
    v = os.environ.get(name, "")
    if not v:
        return None
    if len(v) >= PATH_MAX:
        raise ValueError(f"{name}: longer than {PATH_MAX - 1} characters")
    return v


def checkpoint_done():
    """The acknowledgement, after the checkpoint is written and durable:
    creates $TESSERA_CHECKPOINT_DONE (temporary file, fsync, rename). Returns
    True if it did, False when not under Tessera (the variable unset)."""
    path = _path("TESSERA_CHECKPOINT_DONE")
    if path is None:
        return False
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write("checkpointed\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return True


def report_step(seconds):
    """Appends one step's duration in seconds (a finite number > 0) to
    $TESSERA_STEP_FILE, one line per call, written whole. Returns True if
    it did, False when not under Tessera."""
    global _step_file
    s = float(seconds)
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"seconds: {seconds!r} is not a positive finite number")
    if _step_file is None:
        path = _path("TESSERA_STEP_FILE")
        if path is None:
            return False
        _step_file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    line = f"{s:.6f}\n".encode()
    if os.write(_step_file, line) != len(line):
        raise OSError("TESSERA_STEP_FILE: short write of a step time")
    return True


def restarts():
    """TESSERA_RESTARTS: how many times the job was stopped to run again
    (above 0: resume from the latest checkpoint); 0 when unset."""
    v = os.environ.get("TESSERA_RESTARTS", "")
    if not v:
        return 0
    if not v.isdigit() or not v.isascii() or int(v) > RESTARTS_MAX:
        raise ValueError(f"TESSERA_RESTARTS: {v!r} is not a whole number in 0..{RESTARTS_MAX}")
    return int(v)


def checkpoint_dir():
    """TESSERA_CHECKPOINT_DIR (the same on every run of the job), or None."""
    return os.environ.get("TESSERA_CHECKPOINT_DIR") or None


def reset():
    """For tests: forget the signal and close the step file."""
    global _flag, _at, _step_file
    _flag, _at = False, None
    if _step_file is not None:
        os.close(_step_file)
        _step_file = None
