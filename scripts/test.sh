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
# The Python tests (the wheel's, and tests/openai_agents.rs) run in a venv
# under target/: it needs Debian's python3-venv.
if ! python3 -c 'import ensurepip' 2>/dev/null && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

# --- Python: the venv the wheel's tests and tests/openai_agents.rs share ---
# target/py-venv holds the pinned test requirements; it is rebuilt only when
# crates/compact-py/requirements-test.txt changes (a hash stamp in the venv).
venv=target/py-venv
requirements=crates/compact-py/requirements-test.txt
stamp="$venv/.requirements.sha256"
if ! sha256sum --check --status "$stamp" 2>/dev/null; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet -r "$requirements"
    sha256sum "$requirements" > "$stamp"
fi
# PyO3 builds the extension module the way maturin does (no libpython link)
# for cargo too, against the venv's interpreter: `cargo test` and `maturin
# develop` then agree on PyO3's build configuration and do not rebuild it
# for each other.
export PYO3_BUILD_EXTENSION_MODULE=1
PYO3_PYTHON="$(pwd)/$venv/bin/python"
export PYO3_PYTHON

# Proptest: enough cases to mean something, bounded so CI stays fast.
export PROPTEST_CASES="${PROPTEST_CASES:-1000}"
# Failing tests print a backtrace; anyhow errors in binaries stay short.
export RUST_BACKTRACE="${RUST_BACKTRACE:-0}"

cargo test --workspace --all-targets --locked
# Doc tests (all-targets skips them).
cargo test --workspace --doc --locked

# --- Python: the wheel (crates/compact-py), built in debug into the venv ---
# pytest runs it against the real openai-agents and langchain packages and a
# real `compact serve` (the binary cargo test just built).
VIRTUAL_ENV="$(pwd)/$venv" "$venv/bin/maturin" develop --quiet --locked \
    --manifest-path crates/compact-py/Cargo.toml
COMPACT_BIN="$(pwd)/target/debug/compact" "$venv/bin/python" -m pytest -q crates/compact-py/tests

# The soak harness: 1000 randomized long sessions with fault injection, every
# invariant checked after every preflight. Release build: it is a load test.
cargo build --release --locked -p compact-soak
./target/release/compact-soak --runs 1000 --seed 7 --quiet --report target/soak-report.json
