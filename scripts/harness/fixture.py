#!/usr/bin/env python3
"""A scriptable harness for murmur's end-to-end tests.

The task text (stdin, or the last argument with --prompt-arg) may hold directives, one per line:

  @sleep SECS        sleep (SIGINT, at any moment, ends the harness with status 130 unless
                     @ignore-sigint came first)
  @ignore-sigint     ignore SIGINT (the capsule must kill it after the grace)
  @stderr TEXT       write TEXT to stderr
  @exit CODE         exit with CODE after the other directives
  @ask QUESTION      run `mur request-input QUESTION` and answer with its reply
  @env               answer with the MURMUR_* environment as JSON
  @fds               answer with what each open file descriptor points at, one per line
  @echo              answer with the whole task text verbatim
  @silent            print nothing
  @grandchild FILE   start a detached grandchild (its own session) and write its pid to FILE
  @pidfile FILE      write this harness's pid to FILE
  @wait-for FILE     wait (at most 60 s) until FILE exists
  @run COMMAND       run COMMAND with sh and answer {"code": N, "out": "...", "err": "..."}
  @delegate NAME TEXT  run `mur delegate-task NAME TEXT` and answer with what it printed
                     (exit 3 with its stderr when it fails)
  @tokenfile FILE    write MURMUR_TASK_TOKEN to FILE (tests of the control surface)
  @turns N           (stream-json) write N assistant turns before the result
  @session ID        (stream-json) report ID as the session id, as a hostile harness could

With --stdin-interrupt (use with --prompt-arg: stdin is then the control channel), any line
arriving on stdin ends the harness with status 130, as an in-band interrupt would.

Anything else is answered "Acknowledged." In --dialect stream-json it speaks Claude Code's
stream-json (system/init with a session id, assistant turns, a result line) and honours
`--resume SESSION`; the answer then says which session it ran in and how many prompts that
session has seen, from a small state file under $FIXTURE_STATE (default: the work folder).
"""
# SIGINT is taken before anything else is imported. Python's own KeyboardInterrupt is not
# enough for a harness that must honour every interrupt: raised inside an import's weakref
# callback (or any __del__), it is printed as "Exception ignored" and dropped, and the harness
# runs on. `_signal` and `posix` are built in and already loaded, so this takes no import lock.
import _signal
import posix


def on_sigint(signum, frame):
    posix.write(2, b"interrupted\n")
    posix._exit(130)


_signal.signal(_signal.SIGINT, on_sigint)

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402


def main():
    announce_ready()
    args = sys.argv[1:]
    dialect = "text"
    resume = None
    prompt = None
    i = 0
    while i < len(args):
        if args[i] == "--dialect":
            dialect = args[i + 1]
            i += 2
        elif args[i] == "--resume":
            resume = args[i + 1]
            i += 2
        elif args[i] == "--stdin-interrupt":
            threading.Thread(target=watch_stdin, daemon=True).start()
            i += 1
        elif args[i] == "--prompt-arg":
            prompt = args[-1]
            i = len(args)
        else:
            i += 1
    if prompt is None:
        prompt = sys.stdin.read()

    answer = "Acknowledged."
    code = 0
    turns = 1
    silent = False
    reported = None
    for line in prompt.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "@ignore-sigint":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        elif word == "@pidfile":
            write_atomically(rest, str(os.getpid()))
        elif word == "@wait-for":
            deadline = time.time() + 60
            while not os.path.exists(rest) and time.time() < deadline:
                time.sleep(0.01)
        elif word == "@delegate":
            name, _, text = rest.partition(" ")
            out = subprocess.run(["mur", "delegate-task", name, text], capture_output=True, text=True)
            if out.returncode != 0:
                sys.stderr.write(out.stderr)
                sys.exit(3)
            answer = out.stdout.rstrip("\n")
        elif word == "@run":
            out = subprocess.run(["sh", "-c", rest], capture_output=True, text=True)
            answer = json.dumps({"code": out.returncode, "out": out.stdout, "err": out.stderr})
        elif word == "@tokenfile":
            write_atomically(rest, os.environ.get("MURMUR_TASK_TOKEN", ""))
        elif word == "@grandchild":
            child = subprocess.Popen(
                ["sleep", "300"], start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            write_atomically(rest, str(child.pid))
        elif word == "@sleep":
            sleep(float(rest))
        elif word == "@stderr":
            sys.stderr.write(rest + "\n")
        elif word == "@exit":
            code = int(rest)
        elif word == "@ask":
            out = subprocess.run(["mur", "request-input", rest], capture_output=True, text=True)
            if out.returncode != 0:
                sys.stderr.write(out.stderr)
                sys.exit(3)
            answer = "reply: " + out.stdout.strip()
        elif word == "@env":
            answer = json.dumps({k: v for k, v in sorted(os.environ.items()) if k.startswith("MURMUR_")})
        elif word == "@fds":
            fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
            lines = []
            for n in fds:
                try:
                    lines.append(f"{n} {os.readlink(f'/proc/self/fd/{n}')}")
                except OSError:
                    pass
            answer = "\n".join(lines)
        elif word == "@echo":
            answer = prompt
        elif word == "@silent":
            silent = True
        elif word == "@turns":
            turns = int(rest)
        elif word == "@session":
            reported = rest

    if dialect == "stream-json":
        session = reported or resume or str(uuid.uuid4())
        state_dir = os.environ.get("FIXTURE_STATE", ".fixture-sessions")
        os.makedirs(state_dir, exist_ok=True)
        path = os.path.join(state_dir, session)
        seen = 0
        if os.path.exists(path):
            with open(path) as f:
                seen = len(f.read().splitlines())
        with open(path, "a") as f:
            f.write("prompt\n")
        if answer == "Acknowledged.":
            answer = f"session={session} resumed={'yes' if resume else 'no'} prompts={seen + 1}"
        emit({"type": "system", "subtype": "init", "session_id": session, "tools": []})
        for n in range(turns):
            emit({"type": "assistant", "session_id": session,
                  "message": {"role": "assistant", "content": [{"type": "text", "text": f"turn {n + 1}"}]}})
        if not silent:
            emit({"type": "result", "subtype": "success", "is_error": code != 0,
                  "result": answer, "session_id": session, "num_turns": turns})
    elif not silent:
        sys.stdout.write(answer + "\n")
    sys.stdout.flush()
    sys.exit(code)


def sleep(secs):
    """time.sleep in short slices. A SIGINT that lands after Python last checked for signals but
    before the sleep's own syscall is only acted on when that syscall returns: one long sleep
    would hold an interrupt back for its whole length, a slice for at most 50 ms."""
    deadline = time.monotonic() + secs
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))


def announce_ready():
    """Creates $FIXTURE_STATE/ready/$MURMUR_TASK_ID: from now on a SIGINT ends this harness.
    Python itself drops a SIGINT that lands in its own start-up (a KeyboardInterrupt raised
    while it imports is printed and ignored), so a test that means to interrupt the harness,
    rather than have it killed after the grace, waits for this file first."""
    task = os.environ.get("MURMUR_TASK_ID")
    if task:
        ready = os.path.join(os.environ.get("FIXTURE_STATE", ".fixture-sessions"), "ready")
        os.makedirs(ready, exist_ok=True)
        write_atomically(os.path.join(ready, task), "")


def write_atomically(path, text):
    """Tests wait for the file to exist, then read it: it must never exist half-written."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def watch_stdin():
    if sys.stdin.readline():
        sys.stderr.write("interrupted through stdin\n")
        sys.stderr.flush()
        os._exit(130)


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
