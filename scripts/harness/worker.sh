#!/usr/bin/env bash
# The offline worker's harness: a tiny agent that needs no model. It reads the task on stdin
# and answers on stdout (the `text` dialect of DESIGN §8): word and line counts, and the task's
# first line echoed back. Exit 0 with an answer completes the task.
set -euo pipefail
task=$(cat)
# "wait N" as the first line stands for work that takes N seconds (SIGINT ends it at once).
if [[ "$task" =~ ^wait\ ([0-9]+) ]]; then
  sleep "${BASH_REMATCH[1]}" &
  wait $! || exit 130
fi
words=$(printf '%s' "$task" | wc -w | tr -d ' ')
lines=$(printf '%s\n' "$task" | wc -l | tr -d ' ')
first=$(printf '%s\n' "$task" | head -n 1)
printf 'Acknowledged: %s\n' "$first"
printf '(%s words on %s lines, answered by %s for task %s)\n' "$words" "$lines" "$(basename "$0")" "${MURMUR_TASK_ID:-?}"
