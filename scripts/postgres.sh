#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: trust auth, loopback only, a
# free port, everything (data, socket, log) under DIR.
#   scripts/postgres.sh start DIR   prints the server's URL
#   scripts/postgres.sh stop DIR
#   scripts/postgres.sh restart DIR   an immediate stop (as a crash: no
#                                     checkpoint, clients cut off), then a
#                                     start on the same port
# With POSTGRES_TLS=1 the server takes TLS connections only (`ssl=on`,
# `hostssl` in pg_hba.conf, plain connections rejected), with a certificate
# for `localhost` signed by a CA made for it: DIR/tls/ca.crt is the root to
# trust, DIR/tls/other-ca.crt a CA that did not sign it.
# PostgreSQL refuses to run as root: as root, DIR is given to the `postgres`
# user and the server runs as it.
set -euo pipefail

usage() { echo "usage: $0 start|stop|restart DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "scripts/postgres.sh: PostgreSQL is not installed (Debian: apt-get install -y postgresql)" >&2
    exit 1
fi

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "$cmd" in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$dir"
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    tls_opts=""
    if [ "${POSTGRES_TLS:-}" = 1 ]; then
        tls="$dir/tls"
        mkdir -p "$tls"
        (
            cd "$tls"
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=compact test CA" \
                -keyout ca.key -out ca.crt
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=another CA" \
                -keyout other-ca.key -out other-ca.crt
            openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
                -keyout server.key -out server.csr
            printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n' >server.ext
            openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
                -days 2 -extfile server.ext -out server.crt
        ) >"$dir/openssl.log" 2>&1 || { cat "$dir/openssl.log" >&2; exit 1; }
        chmod 600 "$tls/server.key"
        if [ "$(id -u)" = 0 ]; then
            chown -R postgres: "$tls"
        fi
        printf 'local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\nhostnossl all all 0.0.0.0/0 reject\nhostnossl all all ::/0 reject\n' \
            | as_owner tee "$dir/data/pg_hba.conf" >/dev/null
        tls_opts="-c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key"
    fi
    for _ in 1 2 3 4 5 6 7 8; do
        port=$((20000 + RANDOM % 40000))
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            continue # taken
        fi
        if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off $tls_opts" start >/dev/null; then
            echo "postgresql://postgres@127.0.0.1:$port/postgres"
            exit 0
        fi
    done
    echo "scripts/postgres.sh: the server did not start; its log:" >&2
    cat "$dir/server.log" >&2 || true
    exit 1
    ;;
restart)
    # pg_ctl restart reuses the options of the last start (postmaster.opts).
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m immediate -w -t 60 restart >/dev/null
    ;;
stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
    ;;
*) usage ;;
esac
