#!/usr/bin/env python3
"""A stand-in for the Claude Code CLI (`claude -p`) speaking its stream-json protocol both ways,
for murmur's preset tests (tests/presets.rs puts it first on PATH as `claude`).

Input (`--input-format stream-json`): one JSON object per stdin line. A user line
  {"type":"user","message":{"role":"user","content":"<text>"}}
starts a turn. A control line
  {"type":"control_request","request_id":"<id>","request":{"subtype":"interrupt"}}
mid-turn is answered
  {"type":"control_response","response":{"subtype":"success","request_id":"<id>"}}
and ends the turn with a result line that has no `result` key (is_error, subtype
error_during_execution), as the real CLI does. Any other line (a bare {"subtype":"interrupt"}
included) is ignored. Like the real CLI, it waits for further messages after a turn and exits
at end of input: 0, or 1 if its last turn was interrupted.

Output (`--output-format stream-json --verbose`): system/init with the session id, assistant
lines, a result line whose `result` says which session ran and how many prompts it has seen
(state in $FIXTURE_STATE, like fixture.py); `--resume SESSION` continues that session.

SIGINT is recorded and otherwise ignored, the way headless Claude Code does not stop a turn on
it. With FAKE_CLAUDE_IGNORE_CONTROL=1 control requests are ignored too.

Directives in the user text, one per line:
  @sleep SECS      the turn takes this long (after a first assistant line)
  @pidfile FILE    write this process's pid to FILE

With FAKE_CLAUDE_LOG set, every stdin line is appended to that file as it arrives, and
"SIGINT" for each SIGINT, so that tests see exactly what murmur wrote.
"""
import json
import os
import queue
import signal
import sys
import threading
import time
import uuid


def main():
    args = sys.argv[1:]
    opts = {}
    i = 0
    while i < len(args):
        if args[i] in ("--input-format", "--output-format", "--resume", "--model",
                       "--append-system-prompt"):
            opts[args[i]] = args[i + 1]
            i += 2
        else:
            opts[args[i]] = True
            i += 1
    if opts.get("--input-format") != "stream-json" or opts.get("--output-format") != "stream-json":
        fail("this fake speaks only --input-format stream-json --output-format stream-json")
    if "--verbose" not in opts or "-p" not in opts:
        fail("Error: When using --print, --output-format=stream-json requires --verbose")

    signal.signal(signal.SIGINT, lambda *_: log("SIGINT"))
    ignore_control = os.environ.get("FAKE_CLAUDE_IGNORE_CONTROL") == "1"
    lines = queue.Queue()
    threading.Thread(target=read_stdin, args=(lines,), daemon=True).start()

    resume = opts.get("--resume")
    session = resume if isinstance(resume, str) else str(uuid.uuid4())
    interrupted = False
    while True:
        msg = lines.get()
        if msg is None:
            break
        if msg.get("type") != "user":
            continue
        interrupted = turn(session, resume is not None, text_of(msg), lines, ignore_control)
    sys.exit(1 if interrupted else 0)


def turn(session, resumed, text, lines, ignore_control):
    """Runs one turn; answers whether an interrupt ended it."""
    sleep = 0.0
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "@sleep":
            sleep = float(rest)
        elif word == "@pidfile":
            with open(rest + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(rest + ".tmp", rest)
    state_dir = os.environ.get("FIXTURE_STATE", ".fixture-sessions")
    os.makedirs(state_dir, exist_ok=True)
    path = os.path.join(state_dir, "claude-" + session)
    seen = 0
    if os.path.exists(path):
        with open(path) as f:
            seen = len(f.read().splitlines())
    with open(path, "a") as f:
        f.write("prompt\n")
    emit({"type": "system", "subtype": "init", "session_id": session, "tools": []})
    emit({"type": "assistant", "session_id": session,
          "message": {"role": "assistant", "content": [{"type": "text", "text": "working"}]}})
    deadline = time.time() + sleep
    while time.time() < deadline:
        try:
            # Short waits: a SIGINT that lands just before a wait's syscall is acted on when
            # that wait ends.
            msg = lines.get(timeout=min(0.05, max(0.0, deadline - time.time())))
        except queue.Empty:
            continue
        if msg is None:
            # End of input mid-turn: the turn still runs to its end.
            lines.put(None)
            while time.time() < deadline:
                time.sleep(min(0.05, max(0.0, deadline - time.time())))
            break
        is_interrupt = (msg.get("type") == "control_request"
                        and (msg.get("request") or {}).get("subtype") == "interrupt")
        if is_interrupt and not ignore_control:
            emit({"type": "control_response",
                  "response": {"subtype": "success", "request_id": msg.get("request_id")}})
            emit({"type": "result", "subtype": "error_during_execution", "is_error": True,
                  "session_id": session, "num_turns": 1})
            return True
    answer = f"session={session} resumed={'yes' if resumed else 'no'} prompts={seen + 1}"
    emit({"type": "assistant", "session_id": session,
          "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]}})
    emit({"type": "result", "subtype": "success", "is_error": False, "result": answer,
          "session_id": session, "num_turns": 2})
    return False


def read_stdin(lines):
    for raw in sys.stdin:
        log(raw.rstrip("\n"))
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if isinstance(msg, dict):
            lines.put(msg)
    lines.put(None)


def text_of(msg):
    content = (msg.get("message") or {}).get("content")
    if isinstance(content, list):
        return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
    return content if isinstance(content, str) else ""


def log(line):
    path = os.environ.get("FAKE_CLAUDE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fail(text):
    sys.stderr.write(text + "\n")
    sys.exit(1)


if __name__ == "__main__":
    main()
