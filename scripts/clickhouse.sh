#!/usr/bin/env bash
# A throwaway ClickHouse server for the tests and benchmarks: no password,
# loopback only, free ports, everything (data, logs, config) under DIR. Not a
# system service: it runs in the background until `stop`.
#   scripts/clickhouse.sh start DIR   prints the server's HTTP URL
#   scripts/clickhouse.sh stop DIR
# As root, DIR is given to the `clickhouse` user (Debian's package creates
# it) and the server runs as that user.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

bin=$(command -v clickhouse-server || true)
[ -n "$bin" ] || bin=/usr/sbin/clickhouse-server
if [ ! -x "$bin" ]; then
    echo "scripts/clickhouse.sh: ClickHouse is not installed (Debian: apt-get install -y clickhouse-server)" >&2
    exit 1
fi

as_owner() {
    if [ "$(id -u)" = 0 ] && id clickhouse >/dev/null 2>&1; then
        runuser -u clickhouse -- "$@"
    else
        "$@"
    fi
}

free_port() {
    local port
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

case "$cmd" in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    http=$(free_port)
    tcp=$(free_port)
    cat >"$dir/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>$dir/server.log</log>
    <errorlog>$dir/error.log</errorlog>
    <console>0</console>
  </logger>
  <http_port>$http</http_port>
  <tcp_port>$tcp</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/user_files/</user_files_path>
  <format_schema_path>$dir/format_schemas/</format_schema_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>200</max_concurrent_queries>
</yandex>
EOF
    cat >"$dir/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default></default></quotas>
</yandex>
EOF
    if [ "$(id -u)" = 0 ] && id clickhouse >/dev/null 2>&1; then
        chown -R clickhouse: "$dir"
    fi
    # The server's own --pid-file is not written by every version: record
    # the PID of the process started here instead.
    as_owner bash -c "nohup '$bin' --config-file='$dir/config.xml' >'$dir/stdout.log' 2>&1 & echo \$! >'$dir/clickhouse.pid'"
    for _ in $(seq 1 600); do
        if [ "$(curl -s "http://127.0.0.1:$http/ping" 2>/dev/null || true)" = "Ok." ]; then
            echo "http://127.0.0.1:$http"
            exit 0
        fi
        sleep 0.1
    done
    echo "scripts/clickhouse.sh: the server did not start; its logs:" >&2
    cat "$dir/stdout.log" "$dir/error.log" >&2 2>/dev/null || true
    exit 1
    ;;
stop)
    if [ -f "$dir/clickhouse.pid" ]; then
        pid=$(cat "$dir/clickhouse.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 300); do
            kill -0 "$pid" 2>/dev/null || exit 0
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    ;;
*) usage ;;
esac
