#!/usr/bin/env bash
# The offline formation's lead (manifests/split): it splits the task's words into two halves,
# hands one to each worker with `mur call-member` (both at once), and answers with the two
# answers side by side. Needs no model and no network; a failed call fails the task.
set -euo pipefail
task=$(cat)
read -r -a words <<< "$(printf '%s' "$task" | tr '\n' ' ')"
half=$(( (${#words[@]} + 1) / 2 ))
first="${words[*]:0:half}"
second="${words[*]:half}"
left=$(mktemp)
right=$(mktemp)
trap 'rm -f "$left" "$right"' EXIT
mur call-member left "${first:-(nothing)}" > "$left" &
l=$!
mur call-member right "${second:-(nothing)}" > "$right" &
r=$!
wait "$l"
wait "$r"
printf 'left: %s\n' "$(cat "$left")"
printf 'right: %s\n' "$(cat "$right")"
