#!/bin/sh
# Starts PostgreSQL as user postgres; on an empty data directory first makes the cluster, the role
# $POSTGRES_USER with the password in $POSTGRES_PASSWORD_FILE, and the database $POSTGRES_DB it owns.
set -eu
fail() { echo "tidepool-postgres: $*" >&2; exit 1; }
[ -n "${POSTGRES_PASSWORD_FILE:-}" ] || fail "POSTGRES_PASSWORD_FILE is not set: name the file (secret) holding the password"
[ -r "$POSTGRES_PASSWORD_FILE" ] || fail "cannot read POSTGRES_PASSWORD_FILE ($POSTGRES_PASSWORD_FILE)"
[ -s "$POSTGRES_PASSWORD_FILE" ] || fail "POSTGRES_PASSWORD_FILE ($POSTGRES_PASSWORD_FILE) is empty"
case "$POSTGRES_USER$POSTGRES_DB" in *[!a-z0-9_]*) fail "POSTGRES_USER and POSTGRES_DB may hold only a-z, 0-9 and _" ;; esac

mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 0700 "$PGDATA"
as_postgres() { runuser -u postgres -- "$@"; }

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  # initdb reads the first line; the secret may end with a newline.
  head -n 1 "$POSTGRES_PASSWORD_FILE" | tr -d '\r\n' > "$pwfile"
  chown postgres "$pwfile"
  as_postgres initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  printf '%s\n' "listen_addresses = '*'" "password_encryption = scram-sha-256" >> "$PGDATA/postgresql.auto.conf"
  printf '%s\n' 'host all all 0.0.0.0/0 scram-sha-256' 'host all all ::/0 scram-sha-256' >> "$PGDATA/pg_hba.conf"
  # peer authentication maps the OS user postgres to a role of the same name, which does not exist: the
  # superuser is $POSTGRES_USER. Single-user mode needs no authentication at all.
  if [ "$POSTGRES_DB" != "postgres" ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" | as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
  fi
  echo "tidepool-postgres: initialised $PGDATA (role $POSTGRES_USER, database $POSTGRES_DB)"
fi
exec runuser -u postgres -- postgres -D "$PGDATA"
