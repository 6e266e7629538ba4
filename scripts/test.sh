#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what the tests
# need, then the whole workspace test suite, then the soak harness. This is
# the README's test command; .ci/run runs exactly it after fmt and clippy.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the tests need beyond cargo: a real S3-compatible server (moto) for the
# S3 adapter, Debian's Chromium for the timeline UI test, and PostgreSQL.
if ! python3 -c 'import moto.server' 2>/dev/null; then
    python3 -m pip install --quiet 'moto[server]'
fi
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "scripts/test.sh: chromium and chromedriver are required for the UI tests (install them)" >&2
        exit 1
    fi
fi

# A real PostgreSQL for the session store tests: Debian's server, run by
# scripts/postgres.sh as a throwaway instance on a free loopback port.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
        echo "scripts/test.sh: PostgreSQL is required for the session store tests (install it)" >&2
        exit 1
    fi
fi
if [ -z "${COMPACT_TEST_POSTGRES_URL:-}" ]; then
    pg_dir=$(mktemp -d)
    COMPACT_TEST_POSTGRES_URL=$(scripts/postgres.sh start "$pg_dir")
    export COMPACT_TEST_POSTGRES_URL
    trap 'scripts/postgres.sh stop "$pg_dir"; rm -rf "$pg_dir"' EXIT
fi
# The OpenAI Agents SDK test (tests/openai_agents.rs) creates its own venv
# under target/ and pip-installs the SDK there: it needs Debian's python3-venv.
if ! python3 -c 'import ensurepip' 2>/dev/null && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

# Proptest: enough cases to mean something, bounded so CI stays fast.
export PROPTEST_CASES="${PROPTEST_CASES:-1000}"
# Failing tests print a backtrace; anyhow errors in binaries stay short.
export RUST_BACKTRACE="${RUST_BACKTRACE:-0}"

cargo test --workspace --all-targets --locked
# Doc tests (all-targets skips them).
cargo test --workspace --doc --locked

# The soak harness: 1000 randomized long sessions with fault injection, every
# invariant checked after every preflight. Release build: it is a load test.
cargo build --release --locked -p compact-soak
./target/release/compact-soak --runs 1000 --seed 7 --quiet --report target/soak-report.json
