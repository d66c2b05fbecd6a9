#!/usr/bin/env bash
# The test command (README): installs the test-only dependencies, then runs every unit and
# end-to-end test. The end-to-end tests build and drive the real `mur`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/setup_test_deps.py
exec cargo test --workspace --locked -- --test-threads="${MURMUR_TEST_THREADS:-4}"
