#!/usr/bin/env python3
"""A stand-in for the Codex CLI (`codex exec --json`), for murmur's end-to-end tests.

It speaks what `murmur/driver-codex` reads: the prompt on stdin, JSON events on stdout —
`thread.started` (with the thread id `exec resume <id>` takes back), `turn.started`, the
answer as an `item.completed` agent_message, `turn.completed`. Given `resume ID` it continues
that thread; the answer says which thread and how many prompts it has seen (a state file under
$FIXTURE_STATE).

Directives in the prompt: `@sleep SECS` works that long before answering; `@pidfile FILE`
writes its pid. On SIGINT it ends the turn and exits 130, as `codex exec` does since it learned
to shut down on Ctrl-C in --json mode; with FAKE_CODEX_IGNORE_SIGINT=1 it ignores SIGINT, as
older releases could, so only a kill ends it.
"""
import json
import os
import signal
import sys
import time
import uuid


def emit(event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main():
    args = sys.argv[1:]
    if not args or args[0] != "exec" or "--json" not in args:
        sys.stderr.write("fake codex: expected `codex exec --json …`\n")
        sys.exit(2)
    thread = None
    if "resume" in args:
        thread = args[args.index("resume") + 1]
    if os.environ.get("FAKE_CODEX_IGNORE_SIGINT") == "1":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        def interrupted(_signum, _frame):
            emit({"type": "turn.failed", "error": {"message": "turn interrupted"}})
            sys.exit(130)
        signal.signal(signal.SIGINT, interrupted)
    prompt = sys.stdin.read()
    resumed = thread is not None
    thread = thread or str(uuid.uuid4())
    state = os.environ.get("FIXTURE_STATE", ".fixture-sessions")
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, "codex-" + thread)
    seen = 0
    if os.path.exists(path):
        with open(path) as f:
            seen = len(f.read().splitlines())
    with open(path, "a") as f:
        f.write("prompt\n")
    emit({"type": "thread.started", "thread_id": thread})
    emit({"type": "turn.started"})
    for line in prompt.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "@pidfile":
            tmp = rest + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(os.getpid()))
            os.rename(tmp, rest)
        elif word == "@sleep":
            sleep(float(rest))
    text = f"thread={thread} resumed={'yes' if resumed else 'no'} prompts={seen + 1}"
    emit({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": text}})
    emit({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})


def sleep(secs):
    """time.sleep in short slices, so a SIGINT that lands just before a slice's syscall holds
    the interrupt back 50 ms at most, not the whole sleep."""
    deadline = time.monotonic() + secs
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))


if __name__ == "__main__":
    main()
