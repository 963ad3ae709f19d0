-- Statements of the benchmark only (`recheck bench`), read by bench/ through shared/mysql/sql.py with
-- the same placeholders as shared/mysql/queries.sql: the table, and the MySQL queue-table strategies
-- of the seed articles that recheck is compared with. Each claims due rows its own way, then
-- writes them back with write_success, exactly as recheck's workers do. Never part of the image.

-- name: bench_create_table
-- The default layout plus `owner`, the column the UPDATE...LIMIT and LAST_INSERT_ID strategies
-- claim rows with (recheck never writes it, so this index costs recheck nothing).
CREATE TABLE {table} (
    {id} BIGINT UNSIGNED NOT NULL,
    {result} VARCHAR(255) NULL,
    {checked} DATETIME(3) NULL,
    {due} DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    {count} INT UNSIGNED NOT NULL DEFAULT 0,
    {fails} INT UNSIGNED NOT NULL DEFAULT 0,
    {error} VARCHAR(255) NULL,
    owner BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY ({id}),
    KEY {due_index} ({due}, {id}),
    KEY bench_owner (owner)
) ENGINE=InnoDB

-- name: bench_clear_changes
-- The change feed's table, emptied before a run with RECHECK_CHANGES=true.
TRUNCATE TABLE {changes}

-- name: bench_owner_claim_index
-- For the owner-claiming strategies only: `WHERE owner = 0 AND due <= NOW() ORDER BY due, id
-- LIMIT n` then walks this index and stops after n rows. With the plain (owner) index every
-- claim sorts all unclaimed rows (measured: about 1 claim per second on 1,500,000 rows), which
-- would make the comparison unfair to them. Their claims and write-backs maintain it.
ALTER TABLE {table} DROP INDEX bench_owner, ADD INDEX bench_owner (owner, {due}, {id})

-- name: bench_drop_table
DROP TABLE IF EXISTS {table}

-- name: bench_analyze
ANALYZE TABLE {table}

-- name: bench_handler_reads
-- This session's row reads so far, by kind (MySQL and MariaDB name them alike).
SHOW SESSION STATUS LIKE 'Handler_read%%'

-- name: bench_claim_for_update
-- SELECT ... FOR UPDATE: every worker locks the same oldest due rows, so they take turns.
SELECT {id}, TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000
FROM {table}
WHERE {due} <= NOW(3)
ORDER BY {due}, {id}
LIMIT %(limit)s
FOR UPDATE

-- name: bench_claim_skip_locked
-- FOR UPDATE SKIP LOCKED (MySQL 8.0, MariaDB 10.6): workers skip each other's locked rows.
SELECT {id}, TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000
FROM {table}
WHERE {due} <= NOW(3)
ORDER BY {due}, {id}
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: bench_claim_update_limit
-- UPDATE ... SET owner = CONNECTION_ID() ... LIMIT n, then read back what was claimed.
UPDATE {table}
SET owner = CONNECTION_ID()
WHERE owner = 0 AND {due} <= NOW(3)
ORDER BY {due}, {id}
LIMIT %(limit)s

-- name: bench_claimed
SELECT {id}, TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000
FROM {table}
WHERE owner = CONNECTION_ID()

-- name: bench_release
UPDATE {table} SET owner = 0 WHERE owner = CONNECTION_ID()

-- name: bench_claim_last_insert_id
-- The LAST_INSERT_ID(id) trick: claim one row and learn its id without a SELECT ... FOR UPDATE.
UPDATE {table}
SET owner = CONNECTION_ID(), {id} = LAST_INSERT_ID({id})
WHERE owner = 0 AND {due} <= NOW(3)
ORDER BY {due}, {id}
LIMIT 1

-- name: bench_last_claimed
SELECT {id}, TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000
FROM {table}
WHERE {id} = LAST_INSERT_ID()

-- name: bench_floor_write
-- The floor: the least any design must do per check, one batched primary-key UPDATE of the
-- due, checked, count and result columns (the due index maintained), with no read, no JSON
-- and no fence. `recheck bench` reports every strategy's MySQL CPU per check against it.
UPDATE {table}
SET {due} = NOW(3) + INTERVAL %(interval_us)s MICROSECOND,
    {checked} = NOW(3),
    {count} = {count} + 1,
    {result} = 'ok'
WHERE {id} IN %(ids)s

-- name: bench_server_status
-- Connections open now and row lock waits so far, server-wide (MySQL and MariaDB alike).
SHOW GLOBAL STATUS WHERE Variable_name IN ('Threads_connected', 'Innodb_row_lock_waits')

-- name: bench_history_length
-- InnoDB's history list length: undo records a long transaction keeps from being purged
-- (INNODB_METRICS's trx_rseg_history_len, enabled by default on MySQL 8 and MariaDB).
SELECT `count` FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'

-- name: bench_count_due
-- Rows due at least %(lateness_us)s ago, counted through the index and capped so that the
-- benchmark's once-a-second sample costs O(cap) even with a huge backlog. Quarantined rows
-- (year 9999) are never due.
SELECT COUNT(*) FROM (
    SELECT 1 FROM {table}
    WHERE {due} <= NOW(3) - INTERVAL %(lateness_us)s MICROSECOND
    LIMIT %(cap)s) AS due_rows

-- name: bench_pid_file
-- Where the server keeps its process id: the benchmark reads the CPU time of that one process.
SELECT @@pid_file

-- name: bench_checked_span
-- After a drain, every strategy alike: rows checked, checks written, and the first and last
-- checked_at (Unix seconds, the session's time zone as written). A full scan, run once after
-- the strategy's processes have stopped: it costs the measurement nothing.
SELECT COUNT(*), COALESCE(SUM({count}), 0), UNIX_TIMESTAMP(MIN({checked})), UNIX_TIMESTAMP(MAX({checked}))
FROM {table}
WHERE {count} > 0

-- name: bench_rows_updated
-- Rows updated so far, server-wide (MySQL and MariaDB alike; MariaDB has no Innodb_rows_updated):
-- the peers publish no heartbeat, and each of their checks updates its row once, so the sampler
-- counts their progress with this, at no cost per row.
SHOW GLOBAL STATUS LIKE 'Handler_update'

-- name: bench_peer_clock
-- The peers' job notes when its read starts, on the clock checked_at is written with.
SELECT UNIX_TIMESTAMP(NOW(3))

-- name: bench_peer_read_due
-- The peers' periodic job: the due ids a page at a time, by primary-key keyset (in a drain every
-- row is due, so the walk reads only what it returns).
SELECT {id}
FROM {table}
WHERE {id} > %(after)s AND {due} <= NOW(3)
ORDER BY {id}
LIMIT %(limit)s

-- name: bench_peer_write
-- What a team hand-writes after checking a batch: one plain primary-key UPDATE per result value
-- (the no-op check: one per batch), with no fence (a late or repeated task writes again), no
-- per-row error and no jitter. A per-row task sends it with one id.
UPDATE {table}
SET {result} = %(result)s,
    {checked} = NOW(3),
    {due} = NOW(3) + INTERVAL %(interval_us)s MICROSECOND,
    {count} = {count} + 1
WHERE {id} IN %(ids)s

-- name: bench_create_jobs_table
-- One-shot jobs (`recheck bench --mode jobs...`, bench/jobs.py): a queue table as
-- `recheck init-db --create` makes one for a one-shot workload (the due column nullable: NULL is
-- done; defaulting to now on recheck's clock), plus what a queue table has that recheck's own
-- lacks: an AUTO_INCREMENT key, so that producers enqueue with a plain `INSERT ... () VALUES ()`,
-- and `owner`. As for recurring rows (bench_create_table), every strategy gets this same table,
-- and the (owner, due, id) index the UPDATE ... SET owner = ... LIMIT n claim walks is added
-- for that strategy only (bench_owner_claim_index): the others' writes need not maintain it.
CREATE TABLE {table} (
    {id} BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    {result} VARCHAR(255) NULL,
    {checked} DATETIME(3) NULL,
    {due} DATETIME(3) {due_null} DEFAULT {due_default},
    {count} INT UNSIGNED NOT NULL DEFAULT 0,
    {fails} INT UNSIGNED NOT NULL DEFAULT 0,
    {error} VARCHAR(255) NULL,
    owner BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY ({id}),
    KEY {due_index} ({due}, {id}),
    KEY bench_owner (owner)
) ENGINE=InnoDB

-- name: bench_produce
-- A producer's job (bench/producer.py): one row, its own autocommit transaction, nothing named
-- but the table: the due column's default makes it due when the INSERT runs.
INSERT INTO {table} () VALUES ()

-- name: bench_jobs_inserted
-- Jobs inserted so far, sampled once a second (an AUTO_INCREMENT key: one index dive). Rows the
-- sampler cannot see yet (not committed) are not counted.
SELECT COALESCE(MAX({id}), 0) FROM {table}

-- name: bench_jobs_pending
-- Jobs neither done (NULL) nor dead (parked in year 9999), through the due index, capped: how
-- the bench waits for the consumers to finish once the producers have stopped.
SELECT COUNT(*) FROM (
    SELECT 1 FROM {table}
    WHERE {due} < TIMESTAMP'9999-01-01 00:00:00'
    LIMIT %(cap)s) AS pending

-- name: bench_jobs_tally
-- After a jobs run, once every process has stopped (a full scan: it costs the measurement
-- nothing): rows, pending (left behind), dead, and rows written more than once.
SELECT COUNT(*),
       COALESCE(SUM({due} < TIMESTAMP'9999-01-01 00:00:00'), 0),
       COALESCE(SUM({due} >= TIMESTAMP'9999-01-01 00:00:00'), 0),
       COALESCE(SUM({count} > 1), 0)
FROM {table}

-- name: bench_ids_from
-- The idle bench's tables (bench/idle.py): each table's AUTO_INCREMENT ids start where the
-- others' do not reach, so a check's stamps, which name ids alone, say which job started.
ALTER TABLE {table} AUTO_INCREMENT = %s
