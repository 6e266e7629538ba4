#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what the tests
# need, then the whole workspace test suite. This is the README's test command,
# and .ci/run runs exactly it after fmt and clippy.
set -euo pipefail
cd "$(dirname "$0")/.."

# Proptest: enough cases to mean something, bounded so CI stays fast.
export PROPTEST_CASES="${PROPTEST_CASES:-1000}"

cargo test --workspace --all-targets --locked
# Doc tests (all-targets skips them).
cargo test --workspace --doc --locked
