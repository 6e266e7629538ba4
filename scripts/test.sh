#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what the tests
# need, then the whole workspace test suite, then the soak harness. This is
# the README's test command; .ci/run runs exactly it after fmt and clippy.
set -euo pipefail
cd "$(dirname "$0")/.."

# The servers this script starts are stopped on the way out.
pg_dir=""
ch_dir=""
cleanup() {
    if [ -n "$pg_dir" ]; then scripts/postgres.sh stop "$pg_dir"; rm -rf "$pg_dir"; fi
    if [ -n "$ch_dir" ]; then scripts/clickhouse.sh stop "$ch_dir"; rm -rf "$ch_dir"; fi
}

# What the tests need beyond cargo: a real S3-compatible server (moto) for the
# S3 adapter, Debian's Chromium for the timeline UI test, PostgreSQL,
# ClickHouse and Arize Phoenix.
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
# openssl makes the certificates of the TLS-only PostgreSQL that
# crates/compact-middleware/tests/postgres_tls.rs starts.
if ! command -v openssl >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
fi
if [ -z "${COMPACT_TEST_POSTGRES_URL:-}" ]; then
    pg_dir=$(mktemp -d)
    COMPACT_TEST_POSTGRES_URL=$(scripts/postgres.sh start "$pg_dir")
    export COMPACT_TEST_POSTGRES_URL
    trap cleanup EXIT
fi
# A real ClickHouse for the shared trace store (tests/serve_clickhouse.rs):
# Debian's server, run by scripts/clickhouse.sh on free loopback ports.
if ! command -v clickhouse-server >/dev/null 2>&1 && [ ! -x /usr/sbin/clickhouse-server ]; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clickhouse-server >/dev/null
    else
        echo "scripts/test.sh: clickhouse-server is required for the shared store tests (install it)" >&2
        exit 1
    fi
fi
if [ -z "${COMPACT_TEST_CLICKHOUSE_URL:-}" ]; then
    ch_dir=$(mktemp -d)
    COMPACT_TEST_CLICKHOUSE_URL=$(scripts/clickhouse.sh start "$ch_dir")
    export COMPACT_TEST_CLICKHOUSE_URL
    trap cleanup EXIT
fi
# A real OTLP backend for the exporter (ariadne-exporter/tests/phoenix.rs):
# Arize Phoenix from PyPI in a venv of its own (its dependencies are many and
# pinned differently from the wheel's), kept under target/ between runs.
phoenix_venv=target/phoenix-venv
phoenix_pin="arize-phoenix==20.26.1"
if [ "$(cat "$phoenix_venv/.pin" 2>/dev/null)" != "$phoenix_pin" ]; then
    rm -rf "$phoenix_venv"
    if python3 -m venv "$phoenix_venv" && "$phoenix_venv/bin/python" -m pip install --quiet "$phoenix_pin"; then
        echo "$phoenix_pin" > "$phoenix_venv/.pin"
    else
        echo "scripts/test.sh: warning: Arize Phoenix could not be installed; its test skips" >&2
        rm -rf "$phoenix_venv"
    fi
fi
# The Python tests (the wheel's, and tests/openai_agents.rs) run in a venv
# under target/: it needs Debian's python3-venv.
if ! python3 -c 'import ensurepip' 2>/dev/null && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

# A real agent CLI for the proxy's test (compact-service's proxy_clients.rs):
# Codex CLI from npm, with its binary; it runs offline against the scripted
# provider on loopback.
codex_pin="@openai/codex@0.171.0"
if ! command -v codex >/dev/null 2>&1 || [ "$(codex --version 2>/dev/null)" != "codex-cli ${codex_pin##*@}" ]; then
    if command -v npm >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }; then
        npm install --global --silent "$codex_pin" >/dev/null
    else
        echo "scripts/test.sh: npm is required to install Codex CLI for the proxy test (install it)" >&2
        exit 1
    fi
fi

# --- Python: the venv the wheel's tests, tests/openai_agents.rs and the proxy's
# client tests (compact-service's proxy_clients.rs) share ---
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
