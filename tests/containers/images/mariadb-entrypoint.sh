#!/bin/sh
# First start (empty data folder): create the system tables, set the root password for local
# and remote logins, create MYSQL_DATABASE (and MYSQL_USER with all rights on it), run
# /docker-entrypoint-initdb.d/*.sql, all on a socket-only server. Then the real server, with the
# options the service's `command` gives. Stand-in for the official image's entrypoint.
set -eu
: "${MYSQL_ROOT_PASSWORD:?MYSQL_ROOT_PASSWORD is required}"
datadir=/var/lib/mysql
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld "$datadir"
if [ ! -d "$datadir/mysql" ]; then
    mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db >/dev/null
    socket=/run/mysqld/init.sock
    mariadbd --user=mysql --datadir="$datadir" --skip-networking --socket="$socket" &
    pid=$!
    until mariadb-admin --socket="$socket" ping --silent 2>/dev/null; do sleep 0.2; done
    {
        echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$MYSQL_ROOT_PASSWORD';"
        echo "CREATE USER 'root'@'%' IDENTIFIED BY '$MYSQL_ROOT_PASSWORD';"
        echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
        if [ -n "${MYSQL_DATABASE:-}" ]; then echo "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DATABASE\`;"; fi
        if [ -n "${MYSQL_USER:-}" ]; then
            echo "CREATE USER '$MYSQL_USER'@'%' IDENTIFIED BY '${MYSQL_PASSWORD:?}';"
            echo "GRANT ALL ON \`${MYSQL_DATABASE:?}\`.* TO '$MYSQL_USER'@'%';"
        fi
    } | mariadb --socket="$socket" -uroot
    for script in /docker-entrypoint-initdb.d/*.sql; do
        [ -f "$script" ] || continue
        echo "entrypoint: running $script"
        mariadb --socket="$socket" -uroot -p"$MYSQL_ROOT_PASSWORD" ${MYSQL_DATABASE:+"$MYSQL_DATABASE"} < "$script"
    done
    kill "$pid" && wait "$pid"
    echo "entrypoint: database initialised"
fi
exec mariadbd --user=mysql --datadir="$datadir" --socket=/run/mysqld/mysqld.sock "$@"
