-- Every SQL statement recheck runs, by name. Read by shared/sql.py.
--
-- {table}, {id}, {due}, {checked}, {result}, {count}, {fails}, {error}, {due_index} and
-- {database} are identifiers from the configuration, validated as plain identifiers and quoted
-- with backticks before they are put here. The key fragments come from the id column's own type
-- (read from the table, see shared/keytypes.py): {key_column} reads a JSON batch's key,
-- {key_match} turns it into a value of the id column's type (its character set and collation
-- for text keys, so the primary key index is used), {key_out} prints a key for a queue entry.
-- {next_interval_us} is the workload's interval in microseconds, or the row's own interval
-- column's, kept within min_interval and max_interval (shared/sql.py renders it).
-- Data only ever travels as %(name)s parameters.
--
-- Portability: every statement runs unchanged on MySQL 8.0+ and MariaDB 10.6+. No RETURNING,
-- no VALUES ROW(...) (MySQL only), no VALUES (...) table constructor (MariaDB only). JSON_TABLE
-- exists in both (MySQL 8.0.4, MariaDB 10.6) and turns one JSON parameter into a derived table,
-- which is how a whole batch is written in one statement.
--
-- Due times cross the wire as integer milliseconds after 1970-01-01 00:00:00 of the DATETIME
-- value itself: TIMESTAMPDIFF/INTERVAL arithmetic on DATETIME applies no time zone, so the
-- value a worker fences on is exactly the value the dispatcher read.

-- name: db_now
-- The database clock. Due decisions use it, never a host clock.
SELECT NOW(3)

-- name: due_page
-- The next page of rows due at least %(lateness_us)s ago, after the keyset cursor and up to
-- (before_due, before_id) included, oldest first, as ONE string of queue entries
-- "id:due_ms id:due_ms ...": one row to send and to parse instead of thousands (measured: 4.9
-- -> 1.6 us of CPU per row in all). The session sets group_concat_max_len high enough for the largest page (see db.py).
-- The keyset is spelled out as `due > x OR (due = x AND id > y)`: with a row constructor
-- `(due, id) > (x, y)` MariaDB and MySQL may range-scan on the first column only, which rereads
-- every row sharing one due time (a bulk import) on every poll: O(backlog), not O(batch).
-- GROUP_CONCAT keeps its own ORDER BY: the cursor is taken from the last entry.
-- A NULL after_id (before_id) stands for "before (after) every key": the first and last pages
-- of a pass, for keys of any type.
SELECT GROUP_CONCAT(page.entry ORDER BY page.due, page.row_id SEPARATOR ' ')
FROM (
    SELECT CONCAT({key_out}, ':', TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000)
               AS entry,
           {due} AS due, {id} AS row_id
    FROM {table}
    WHERE {due} <= NOW(3) - INTERVAL %(lateness_us)s MICROSECOND
      AND ({due} < %(before_due)s OR ({due} = %(before_due)s AND (%(before_id)s IS NULL OR {id} <= %(before_id)s)))
      AND ({due} > %(after_due)s OR ({due} = %(after_due)s AND (%(after_id)s IS NULL OR {id} > %(after_id)s)))
    ORDER BY {due}, {id}
    LIMIT %(limit)s
) AS page

-- name: write_success
-- Results of one batch, fenced: a row is written only if it still has the due time it was
-- dispatched with, so a late or duplicate worker touches 0 rows. NOW(3) is the statement's
-- start time on both servers, so checked_at and the next due time agree. A row's next due time
-- is its check's Recheck(after=...) (after_us, already clamped) or else {next_interval_us}.
UPDATE {table} AS t
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]',
        result VARCHAR(1024) PATH '$[2]',
        after_us BIGINT PATH '$[3]')) AS v
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{result} = v.result,
    t.{checked} = NOW(3),
    t.{due} = NOW(3) + INTERVAL COALESCE(v.after_us, {next_interval_us}) MICROSECOND,
    t.{count} = t.{count} + 1,
    t.{fails} = 0,
    t.{error} = NULL

-- name: lock_unlocked
-- The rows of a batch that nobody else has locked, locked now (inside the write-back's own
-- transaction): the way around an application transaction holding a row for longer than
-- recheck's lock wait. SKIP LOCKED exists in MySQL 8.0 and MariaDB 10.6. The rows it skips are
-- left for a later cycle; the write-back that follows touches only the rows locked here.
SELECT t.{id}
FROM {table} AS t
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS ({key_column})) AS v ON t.{id} = {key_match}
FOR UPDATE SKIP LOCKED

-- name: writable
-- Whether the server takes writes: a read-only server refuses any UPDATE before looking at a
-- row (1290), so this one, which can match nothing, costs nothing otherwise.
UPDATE {table} SET {due} = {due} WHERE {id} IS NULL

-- name: record_failure
-- First of two statements for failed rows (same transaction): count the failure, keep the error.
-- Two statements because MySQL does not promise the order of assignments in a multi-table
-- UPDATE, and the retry delay below depends on the new failure count.
UPDATE {table} AS t
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]',
        error VARCHAR(1024) PATH '$[2]')) AS v
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{fails} = t.{fails} + 1,
    t.{error} = v.error

-- name: schedule_retry
-- Second statement for failed rows: retry after retry_base * 2^(failures - 1), at most retry_max.
UPDATE {table} AS t
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]')) AS v
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{due} = NOW(3) + INTERVAL
        LEAST(%(retry_max_ms)s, %(retry_base_ms)s << LEAST(GREATEST(t.{fails}, 1) - 1, 40)) * 1000 MICROSECOND

-- name: quarantine
-- Park rows whose check keeps killing workers: a due time in year 9999 is never reached, the
-- reason goes to the error column. Fenced like a write-back. `recheck release` undoes it.
UPDATE {table} AS t
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]')) AS v
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{due} = TIMESTAMP'9999-12-31 00:00:00',
    t.{error} = %(reason)s

-- name: release
-- Put quarantined rows back: due now, error cleared.
UPDATE {table}
SET {due} = NOW(3), {error} = NULL, {fails} = 0
WHERE {id} IN %(ids)s AND {due} = TIMESTAMP'9999-12-31 00:00:00'

-- name: one_row
-- `recheck inspect`: one row by its key, with the database clock's view of its lateness.
SELECT {due}, {checked}, {result}, {count}, {fails}, {error}, NOW(3),
       TIMESTAMPDIFF(MICROSECOND, {due}, NOW(3)) / 1000000,
       TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000
FROM {table}
WHERE {id} = %(id)s

-- name: count_rows
SELECT COUNT(*) FROM {table}

-- name: freshness_counts
-- Rows due now, overdue by more than 1 s and by more than %(interval_us)s, from ONE pass over
-- the oldest %(cap)s due entries of the due index: each count is exactly min(true count, cap),
-- since the rows of every overdue class are the oldest due ones. O(cap) whatever the backlog.
-- NOW(3) is evaluated once per statement (MySQL 8 and MariaDB alike), so the three agree.
SELECT COUNT(*),
       COALESCE(SUM({due} <= NOW(3) - INTERVAL 1 SECOND), 0),
       COALESCE(SUM({due} <= NOW(3) - INTERVAL %(interval_us)s MICROSECOND), 0)
FROM (
    SELECT {due} FROM {table}
    WHERE {due} <= NOW(3)
    ORDER BY {due}
    LIMIT %(cap)s) AS due_rows

-- name: oldest_lateness
-- Seconds the most overdue row is past its due time (negative: nothing is due). One index probe.
SELECT TIMESTAMPDIFF(MICROSECOND, MIN({due}), NOW(3)) / 1000000 FROM {table}

-- name: count_stale
-- Rows not quarantined whose last completed check is older than %(age_us)s, or never checked.
-- A full scan (the checked column has no index): for end-of-run summaries, never for loops.
SELECT COUNT(*) FROM {table}
WHERE ({checked} IS NULL OR {checked} < NOW(3) - INTERVAL %(age_us)s MICROSECOND)
  AND {due} <> TIMESTAMP'9999-12-31 00:00:00'

-- name: list_failing
-- Rows whose last check failed, with the error. A scan (fail_count has no index): sampled
-- every 30 s by the dashboard, never in a loop.
SELECT {id}, {fails}, {error} FROM {table}
WHERE {fails} > 0 AND {due} <> TIMESTAMP'9999-12-31 00:00:00'
LIMIT %(limit)s

-- name: count_failing
-- Rows whose last check failed (not quarantined), counted up to %(cap)s. A scan of the table
-- (fail_count has no index): `recheck status` and the dashboard's 30 s samples, never a loop.
SELECT COUNT(*) FROM (
    SELECT 1 FROM {table}
    WHERE {fails} > 0 AND {due} <> TIMESTAMP'9999-12-31 00:00:00'
    LIMIT %(cap)s
) AS failing

-- name: count_quarantined
SELECT COUNT(*) FROM {table} WHERE {due} = TIMESTAMP'9999-12-31 00:00:00'

-- name: list_quarantined
SELECT {id}, {error} FROM {table}
WHERE {due} = TIMESTAMP'9999-12-31 00:00:00'
ORDER BY {id}
LIMIT %(limit)s

-- name: database_exists
SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %(database)s

-- name: create_database
CREATE DATABASE IF NOT EXISTS {database} CHARACTER SET utf8mb4

-- name: create_app_user
-- The least-privilege user of `init-db` (RECHECK_APP_USER). CREATE USER IF NOT EXISTS and
-- ALTER USER ... IDENTIFIED BY are the same on MySQL 8 and MariaDB; the name and password are
-- parameters (an account name may be a quoted string). Any host: containers' addresses change.
CREATE USER IF NOT EXISTS %(user)s@'%%' IDENTIFIED BY %(password)s

-- name: set_app_password
-- Keeps the password in step with .env when it changes.
ALTER USER %(user)s@'%%' IDENTIFIED BY %(password)s

-- name: grant_app_user
-- All the dispatcher, workers, `status` and `release` need: read and update the one table.
GRANT SELECT, UPDATE ON {database}.{table} TO %(user)s@'%%'

-- name: create_table
-- recheck's own table (`init-db` makes it only when asked, or for the demo table). The table
-- comment marks it as recheck's: `seed` writes and truncates only tables that carry it.
CREATE TABLE IF NOT EXISTS {table} (
    {id} BIGINT UNSIGNED NOT NULL,
    {result} VARCHAR(255) NULL COMMENT 'recheck: the last check''s result',
    {checked} DATETIME(3) NULL COMMENT 'recheck: database time of the last completed check',
    {due} DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) COMMENT 'recheck: when the row is next due',
    {count} INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'recheck: completed checks',
    {fails} INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'recheck: consecutive failed checks',
    {error} VARCHAR(255) NULL COMMENT 'recheck: the last failure or quarantine reason',
    PRIMARY KEY ({id}),
    KEY {due_index} ({due}, {id})
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='made by recheck init-db: demo rows may be seeded here'

-- name: table_comment
SELECT TABLE_COMMENT FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %(table)s

-- name: table_columns
SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE, COLUMN_TYPE, DATETIME_PRECISION,
       COLUMN_COMMENT, CHARACTER_SET_NAME, COLLATION_NAME
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %(table)s

-- name: table_indexes
SELECT INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %(table)s
ORDER BY INDEX_NAME, SEQ_IN_INDEX

-- name: max_id
SELECT COALESCE(MAX({id}), 0) FROM {table}

-- name: seed_rows
-- Up to 100,000 rows per statement, generated by the server from a cross join of digit
-- tables (portable: no sequence engine, no recursive CTE limits). Row k of the whole seed
-- (k = %(offset)s + n) is due at base + k * spread / total: evenly over one interval.
INSERT INTO {table} ({id}, {due})
SELECT %(first)s + n,
       CAST(%(base)s AS DATETIME(3)) + INTERVAL ((%(offset)s + n) * %(spread_us)s DIV %(total)s) MICROSECOND
FROM (SELECT d1.d + 10 * d2.d + 100 * d3.d + 1000 * d4.d + 10000 * d5.d AS n
      FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) AS d1,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) AS d2,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) AS d3,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) AS d4,
      (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) AS d5) AS seq
WHERE n < %(count)s

-- name: truncate
TRUNCATE TABLE {table}

-- name: spread_chunk_end
-- `recheck spread` walks the table in primary-key order, %(limit)s rows per statement: the last
-- id of the next chunk after %(after)s (NULL: from the first row), or NULL at the end.
SELECT MAX({id}) FROM (
    SELECT {id} FROM {table} WHERE (%(after)s IS NULL OR {id} > %(after)s) ORDER BY {id} LIMIT %(limit)s
) AS chunk

-- name: spread_due
-- Due times of one chunk spread over one interval from now, by a hash of the id (stable, and
-- even whatever the ids look like), so rows that all got one due time (a new due column, a bulk
-- import) are not checked in one burst every interval. Quarantined rows stay parked. A row in
-- flight meanwhile is harmless: its write is fenced out and the new due time stands.
UPDATE {table}
SET {due} = NOW(3) + INTERVAL FLOOR(CRC32({id}) / 4294967296 * %(interval_us)s) MICROSECOND
WHERE (%(after)s IS NULL OR {id} > %(after)s) AND {id} <= %(last)s
  AND {due} <> TIMESTAMP'9999-12-31 00:00:00'

