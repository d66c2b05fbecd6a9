#!/usr/bin/env bash
# The guide's orchestrator (manifests/guide/orchestrator.yaml): hands its task to the worker its
# allow list names (WORKER_URL, default http://localhost:52222) with `mur send-message`, and
# answers with the worker's task as it settled (one line of JSON). A refused send fails the task.
set -euo pipefail
task=$(cat)
mur send-message "${WORKER_URL:-http://localhost:52222}" "$task"
