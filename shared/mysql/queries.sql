-- Every SQL statement recheck runs, by name. Read by sql.py.
--
-- {table}, {id}, {due}, {checked}, {result}, {count}, {fails}, {error}, {due_index} and
-- {database} are identifiers from the configuration, validated as plain identifiers and quoted
-- with backticks before they are put here. The key fragments come from the id column's own type
-- (read from the table, see keytypes.py): {key_column} reads a JSON batch's key ({key_alone}
-- the key of a batch of bare keys, ["k1", "k2"]),
-- {key_match} turns it into a value of the id column's type (its character set and collation
-- for text keys, so the primary key index is used), {key_out} prints a key for a queue entry.
-- {row_interval_us} is the workload's interval in microseconds, or the row's own interval
-- column's, kept within min_interval and max_interval; {next_due} and {retry_due} are the next
-- due times a write-back sets ({retry_due_us} a one-shot row's backoff), jittered, or a scheduled
-- row's next tick ({tick_success}, {tick_failure}: v.at_ms, the batch's last element; sql.py
-- renders them); {check_columns} the columns
-- a check asked for (`columns`), {check_text} the same as one JSON object (rowtext.py).
-- Data only ever travels as %(name)s parameters.
--
-- Portability: every statement runs unchanged on MySQL 8.0+ and MariaDB 10.6+. No RETURNING,
-- no VALUES ROW(...) (MySQL only), no VALUES (...) table constructor (MariaDB only). JSON_TABLE
-- exists in both (MySQL 8.0.4, MariaDB 10.6) and turns one JSON parameter into a derived table,
-- which is how a whole batch is written in one statement. It always comes first, joined to the
-- table with STRAIGHT_JOIN (both servers): the batch is read first, then each row by primary key.
-- Left to itself the optimizer reads a small table (a queue table of a few dozen rows) first,
-- scanning it, and a scanning UPDATE, DELETE or FOR UPDATE waits for every row another
-- transaction holds, a producer's uncommitted INSERT among them (and locks every row it passed).
--
-- Due times cross the wire as integer milliseconds after 1970-01-01 00:00:00 of the DATETIME
-- value itself: TIMESTAMPDIFF/INTERVAL arithmetic on DATETIME applies no time zone, so the
-- value a worker fences on is exactly the value the dispatcher read.

-- name: db_now
-- The database clock. Due decisions use it, never a host clock.
SELECT NOW(3)

-- name: db_clock
-- The database clock twice: as the DATETIME value due times are compared with (session time
-- zone), and as Unix seconds (UNIX_TIMESTAMP undoes the session time zone), which error groups
-- are stamped with, so every worker stamps on one clock whatever its host's says.
SELECT NOW(3), UNIX_TIMESTAMP(NOW(3))

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
-- {group_out}: with a group column (docs/groups.md), ":" and the row's group in hex ("NULL" for
-- NULL) ends each entry: dispatch.lua queues the entry in its group's list (sql.py group_out).
-- {class_filter}: with a priority column, the rest's pass reads the rows whose priority column is
-- not 1 (through the due index) and the priority pass ("due_page_priority", sql.py) those whose
-- column is 1 (through the (priority, due, id) index); without one, nothing.
SELECT GROUP_CONCAT(page.entry ORDER BY page.due, page.row_id SEPARATOR ' ')
FROM (
    SELECT CONCAT({key_out}, ':', TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000
                  {group_out})
               AS entry,
           {due} AS due, {id} AS row_id
    FROM {table}
    WHERE {due} <= NOW(3) - INTERVAL %(lateness_us)s MICROSECOND
      AND ({due} < %(before_due)s OR ({due} = %(before_due)s AND (%(before_id)s IS NULL OR {id} <= %(before_id)s)))
      AND ({due} > %(after_due)s OR ({due} = %(after_due)s AND (%(after_id)s IS NULL OR {id} > %(after_id)s)))
      {class_filter}
    ORDER BY {due}, {id}
    LIMIT %(limit)s
) AS page

-- name: due_probe
-- One workload's part of the dispatcher's idle probe (shared/mysql/probe.py joins the parts of
-- every idle workload on one server with UNION ALL: one statement for all of them): the first
-- argument, the part's number, if a row is due now after the keyset position its next poll would
-- read after (the due time in microseconds on the due times' own epoch, twice, then the key, twice:
-- NULL for every key at that due time). The keyset spelled out as in due_page: one range over
-- the due index, one dive. The cursor's own row, still in flight, is not after it: a recurring
-- workload's probe does not wake it for the row it has just read. Parked rows (far in the future)
-- and done rows (NULL) are never in the range. MySQL 8 and MariaDB both take a parenthesized
-- SELECT with its own LIMIT as a UNION's part.
(SELECT %s FROM {table}
 WHERE {due} <= NOW(3)
   AND ({due} > TIMESTAMP'1970-01-01 00:00:00' + INTERVAL %s MICROSECOND
        OR ({due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL %s MICROSECOND AND (%s IS NULL OR {id} > %s)))
 LIMIT 1)

-- name: overdue_probe
-- One workload's part of the sweep's probe (dispatcher/reconciler.py SweepProbe joins the parts
-- of the workloads swept together on one server with UNION ALL, as the idle probe does): the
-- first argument, the part's number, if a row is due at least the second argument's microseconds
-- ago up to and including the keyset position that follows (the dispatcher's cursor: its due
-- time twice, then its key twice; NULL for every key at that due time). What a sweep's first
-- page would read, one dive into the due index: in healthy running, nothing. {class_filter} as
-- in due_page (the priority pass's part is "overdue_probe_priority", sql.py).
(SELECT %s FROM {table}
 WHERE {due} <= NOW(3) - INTERVAL %s MICROSECOND
   AND ({due} < %s OR ({due} = %s AND (%s IS NULL OR {id} <= %s)))
   {class_filter}
 LIMIT 1)

-- name: write_success
-- Results of one batch, fenced: a row is written only if it still has the due time it was
-- dispatched with, so a late or duplicate worker touches 0 rows. NOW(3) is the statement's
-- start time on both servers, so checked_at and the next due time agree. A row's next due time
-- is its check's Recheck(after=...) (after_us, already clamped) or else its interval, up to
-- `jitter` of it earlier ({next_due}); a scheduled row's is its next tick, unless its check
-- asked for a Recheck(after=).
-- {unchanged_only}: nothing, but in "write_unchanged" (sql.py), the change feed's first write:
-- only the rows that are not failing and whose stored result is this very text, byte for byte
-- (CAST AS CHAR prints a number or a time as stored: '0.50' is not '0.5'), so their write has
-- nothing to record (writeback.WritePlan). Whatever it leaves (a change, a recovery, text that
-- is equal only in the column's own type) the full path reads and writes: the fence skips the
-- rows written here, whose due time has moved.
UPDATE JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]',
        result {result_text} PATH '$[2]',
        after_us BIGINT PATH '$[3]'{tick_success})) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
 {unchanged_only}
SET t.{result} = v.result,
    t.{checked} = NOW(3),
    t.{due} = {next_due},
    t.{count} = t.{count} + 1,
    t.{fails} = 0,
    t.{error} = NULL

-- name: lock_unlocked
-- The rows of a batch that nobody else has locked, locked now (inside the write-back's own
-- transaction): the way around an application transaction holding a row for longer than
-- recheck's lock wait. SKIP LOCKED exists in MySQL 8.0 and MariaDB 10.6. The rows it skips are
-- left for a later cycle; the write-back that follows touches only the rows locked here.
SELECT t.{id}
FROM JSON_TABLE(%(batch)s, '$[*]' COLUMNS ({key_column})) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY) ON t.{id} = {key_match}
FOR UPDATE SKIP LOCKED

-- name: check_rows
-- The columns a check asked for (`columns`), for a whole take in ONE statement by primary key;
-- a row deleted since its dispatch is simply not there.
SELECT t.{id}, {check_columns}
FROM JSON_TABLE(%(keys)s, '$[*]' COLUMNS ({key_alone})) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY) ON t.{id} = {key_match}

-- name: schedule_rows
-- A scheduled workload's (docs/schedules.md): the schedule and time zone of each row of a batch
-- about to be written ({schedule_columns}: the row's columns as text, or NULL for the workload's
-- own), in ONE statement by primary key: what the application wrote last is what counts. A row
-- per distinct (schedule, zone) with the places in the batch (from 1) of its rows: a few values
-- to decode, not three per row (a row deleted since is in no group); cheaper on both servers'
-- and the worker's side than a row each or one JSON array (docs/performance.md).
SELECT {schedule_columns}, GROUP_CONCAT(v.n)
FROM JSON_TABLE(%(keys)s, '$[*]' COLUMNS (n FOR ORDINALITY, {key_alone})) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY) ON t.{id} = {key_match}
GROUP BY 1, 2

-- name: trace_rows
-- Tracing (RECHECK_TRACING, docs/tracing.md): the trace context each row's producer stored
-- ({trace}: the workload's trace_column, a W3C traceparent), for a take in ONE statement by
-- primary key; rows without one are left out.
SELECT t.{id}, {trace}
FROM JSON_TABLE(%(keys)s, '$[*]' COLUMNS ({key_alone})) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY) ON t.{id} = {key_match}
WHERE {trace} IS NOT NULL

-- name: check_rows_text
-- The same rows as check_rows as ONE string: a JSON object per row ({check_text}: column name ->
-- value for the id column and the check's columns, each spelled as rowtext.py decodes it back to
-- what PyMySQL gives), comma-separated, and how many rows it found. One field to send and to
-- decode instead of one per value (PyMySQL decodes those in Python). A row whose object the
-- server cannot build (a value past max_allowed_packet) is left out, and the whole text is cut
-- short past the session's group_concat_max_len (64 MB): fewer objects than rows, and the worker
-- reads the take with check_rows instead.
SELECT GROUP_CONCAT({check_text} SEPARATOR ','), COUNT(*)
FROM JSON_TABLE(%(keys)s, '$[*]' COLUMNS ({key_alone})) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY) ON t.{id} = {key_match}

-- name: changes_read
-- The change feed (`changes = true`): a batch's rows as they are before its write-back, read in
-- the SAME transaction and locked (FOR UPDATE) so that the old values are the ones the writes
-- replace. Fenced like the writes: a retried or late write finds the due time moved and reads
-- nothing, so it records nothing. n is the row's place in the batch (1-based).
SELECT v.n, t.{result}, t.{fails}
FROM JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        n FOR ORDINALITY,
        {key_column},
        due_ms BIGINT PATH '$[1]')) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
FOR UPDATE

-- name: changes_after_write
-- The change feed: the stored results of a batch's rows right after its write-back, in the same
-- transaction (the rows are still locked by changes_read). Compared with what changes_read
-- returned, in the column's own type, it tells a real change ('0.5' written to a DECIMAL(5,2)
-- holding 0.50 is none). Read only when a row's result may have changed (writeback.py).
SELECT v.n, t.{result}
FROM JSON_TABLE(%(batch)s, '$[*]' COLUMNS (n FOR ORDINALITY, {key_column})) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}

-- name: record_changes
-- The transitions of one write-back, last in its transaction (positions are taken just before
-- the commit, so write-backs commit nearly in position order). A multi-row VALUES list, one
-- group per transition (rows.py repeats the group): the number of rows is known, so neither
-- MySQL 8 nor MariaDB reserves spare auto-increment values. The feed has a table of its own per
-- workload table ({changes}), so its positions have no gaps but where a write-back rolled back
-- or is still committing (recheck/client.py tells those apart).
INSERT INTO {changes} (row_key, at, old_result, new_result, old_failing, new_failing, error)
VALUES (%s, NOW(3), %s, %s, %s, %s, %s)

-- name: changes_after
-- The feed from a position on (positions only grow: a reader resumes where it stopped).
SELECT pos, row_key, at, old_result, new_result, old_failing, new_failing, error
FROM {changes}
WHERE pos > %(after)s
ORDER BY pos
LIMIT %(limit)s

-- name: changes_between
-- What has committed in a range of positions a reader saw skipped (a write-back that committed
-- after a later one): a plain read, never waits.
SELECT pos, row_key, at, old_result, new_result, old_failing, new_failing, error
FROM {changes}
WHERE pos BETWEEN %(low)s AND %(high)s
ORDER BY pos

-- name: changes_pending
-- Whether a write-back still holds a position in this range: a locking read that refuses to
-- wait fails (MySQL 3572, MariaDB 1205) if a transaction that has not committed holds one of
-- its rows, or the row just above the range (InnoDB locks that one too: a conservative answer).
-- Succeeds, reading the committed rows, when none does. FOR UPDATE NOWAIT: MySQL 8.0.1+, MariaDB
-- 10.3+ (MySQL 8.0.22+ wants SELECT and DELETE on the table for it: grant_changes gives both).
SELECT pos
FROM {changes}
WHERE pos BETWEEN %(low)s AND %(high)s
FOR UPDATE NOWAIT

-- name: changes_span
-- The oldest and newest position kept (0, 0 when empty).
SELECT COALESCE(MIN(pos), 0), COALESCE(MAX(pos), 0) FROM {changes}

-- name: changes_trim
-- Keep the newest changes_keep changes: the oldest go, a chunk at a time (DELETE ... ORDER BY
-- ... LIMIT runs on both MySQL 8 and MariaDB).
DELETE FROM {changes}
WHERE pos <= %(upto)s
ORDER BY pos
LIMIT %(limit)s

-- name: writable
-- Whether the server takes writes: a read-only server refuses any UPDATE before looking at a
-- row (1290), so this one, which can match nothing, costs nothing otherwise.
UPDATE {table} SET {due} = {due} WHERE {id} IS NULL

-- name: record_failure
-- First of two statements for failed rows (same transaction): count the failure, keep the error,
-- and note the attempt ({checked} is the time of the last attempt, failed or not; the result
-- column keeps the last successful result). Two statements because MySQL does not promise the
-- order of assignments in a multi-table UPDATE, and a backoff below depends on the new count.
UPDATE JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]',
        error {error_text} PATH '$[2]')) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{fails} = t.{fails} + 1,
    t.{error} = v.error,
    t.{checked} = NOW(3)

-- name: schedule_retry
-- Second statement for failed rows: due again after the row's own interval, as after a success
-- (a failure keeps the row's rhythm), or with `retry = "backoff"` after retry_base * 2^(failures
-- - 1), at most retry_max and never later than the row's interval ({retry_due}; a scheduled
-- row's interval ends at its next tick). Counted from
-- the attempt stamp the first statement wrote, not from this statement's own NOW(3), which may be
-- a millisecond later.
UPDATE JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]'{tick_failure})) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{due} = {retry_due}

-- name: write_done
-- One-shot workloads (`once = true`): successes without a Recheck(after=) are done. Fenced like
-- write_success; the due column cleared (NULL), so a done row never enters the keyset's range
-- (`due <= NOW(3)` is never true of NULL) and costs nothing per poll however many there are.
UPDATE JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]',
        result {result_text} PATH '$[2]')) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{result} = v.result,
    t.{checked} = NOW(3),
    t.{due} = NULL,
    t.{count} = t.{count} + 1,
    t.{fails} = 0,
    t.{error} = NULL

-- name: delete_done
-- One-shot workloads with `done = "delete"`: a done row is deleted by the same fenced statement
-- (a late or duplicate worker deletes nothing: the row, or its due time, is gone).
DELETE t
FROM JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]')) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND

-- name: schedule_retry_once
-- Second statement for failed rows of a one-shot workload: retried after retry_base * 2^(failures
-- - 1), at most retry_max ({retry_due_us}), until %(max_attempts)s failures; then dead, parked
-- at 9999-12-29 with its last error: never dispatched, kept, `recheck retry` puts it back.
UPDATE JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]')) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{due} = IF(t.{fails} >= %(max_attempts)s, {dead_due},
                 t.{checked} + INTERVAL {retry_due_us} MICROSECOND)

-- name: quarantine
-- Park rows whose check keeps killing workers: a due time in year 9999 is never reached, the
-- reason goes to the error column. Fenced like a write-back. `recheck release` undoes it.
UPDATE JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        {key_column},
        due_ms BIGINT PATH '$[1]')) AS v
STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY)
  ON t.{id} = {key_match}
 AND t.{due} = TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND
SET t.{due} = {quarantined_due},
    t.{error} = %(reason)s

-- name: release
-- Put quarantined rows back: due now, error cleared.
UPDATE {table} FORCE INDEX (PRIMARY)
SET {due} = NOW(3), {error} = NULL, {fails} = 0
WHERE {id} IN %(ids)s AND {due} = {quarantined_due}

-- name: retry
-- `recheck retry`: dead rows of a one-shot workload back in line, due now, their failures
-- forgotten (max_attempts more), their last error kept until the next attempt.
UPDATE {table} FORCE INDEX (PRIMARY)
SET {due} = NOW(3), {fails} = 0
WHERE {id} IN %(ids)s AND {due} = {dead_due}

-- Parked rows: a due time in year 9999 is never reached, so the keyset over the due index never
-- reads them (pausing costs nothing per poll). Quarantined rows are parked at 9999-12-31 00:00,
-- paused ones at 9999-12-30 00:00, dead ones (one-shot workloads) at 9999-12-29 00:00; any other
-- due time from 9999-01-01 on (one an application wrote by hand) counts as paused too.

-- name: key_states
-- Which of these keys exist, and whether each is paused, quarantined or dead (the application's
-- actions report the others as missing).
SELECT {id},
       COALESCE({due} >= {parked_from} AND {due} <> {quarantined_due}
                AND {due} <> {dead_due}, FALSE),
       COALESCE({due} = {quarantined_due}, FALSE),
       COALESCE({due} = {dead_due}, FALSE),
       {due} IS NULL
FROM {table}
WHERE {id} IN %(ids)s

-- name: mark_now
-- `recheck now`: due now, unless paused, quarantined or dead; a done one-shot row (NULL) is
-- enqueued again. NOW(3) in recheck's own session (its time zone); the application's plain SQL
-- for the same is in docs/application-api.md.
UPDATE {table} FORCE INDEX (PRIMARY) SET {due} = NOW(3)
WHERE {id} IN %(ids)s AND ({due} < {parked_from} OR {due} IS NULL)

-- name: enqueue
-- Client.enqueue (one-shot workloads; docs/queue-tables.md, "Unique and debounced jobs"): rows
-- inserted due at NOW(3) + the delay, or where a unique key already holds the row, that row
-- enqueued again: its given columns written, due at NOW(3) + the delay (a debounce pushes a
-- pending row's due time on), a done or dead row's failures forgotten; a paused or quarantined
-- row keeps its state. {enqueue_columns} and {enqueue_set} are the caller's columns (validated
-- identifiers: rendered as /*markers*/ that rows.py fills in per call), {enqueue_values} one
-- group of %s per row (rows.py repeats it). VALUES(col) in ON DUPLICATE KEY UPDATE is understood by both servers (MySQL 8.0.20+
-- deprecates it with a warning; its row alias is not MariaDB's). The assignments run left to
-- right: the fail count is reset while the due time still says done or dead.
INSERT INTO {table} ({enqueue_columns}, {due})
VALUES {enqueue_values}
ON DUPLICATE KEY UPDATE {enqueue_set}
  {fails} = IF({due} IS NULL OR {due} = {dead_due}, 0, {fails}),
  {due} = IF({due} >= {parked_from} AND {due} <> {dead_due}, {due}, VALUES({due}))

-- name: enqueued_keys
-- The rows Client.enqueue wrote, by the unique column it named ({enqueue_key}): their keys.
SELECT {id} FROM {table} WHERE {enqueue_key} IN %(values)s

-- name: pause
-- `recheck pause`: never dispatched until resumed; a check in flight meanwhile is fenced out.
-- Quarantined and dead rows stay so (`release` and `retry` are their ways back), done rows too.
UPDATE {table} FORCE INDEX (PRIMARY) SET {due} = {paused_due}
WHERE {id} IN %(ids)s AND {due} <> {quarantined_due}
  AND {due} <> {dead_due}

-- name: cancel_done
-- `recheck cancel` with on_cancel = "done" (one-shot rows): never run again, its error saying why.
-- Quarantined and dead rows stay so (release, retry, discard are theirs), done rows too.
UPDATE {table} FORCE INDEX (PRIMARY) SET {due} = NULL, {error} = 'cancelled'
WHERE {id} IN %(ids)s AND {due} <> {quarantined_due} AND {due} <> {dead_due}

-- name: cancel_delete
-- `recheck cancel` with on_cancel = "delete": the rows deleted (a check running on one is
-- cancelled; its write finds no row).
DELETE FROM {table} WHERE {id} IN %(ids)s

-- name: resume
-- `recheck resume`: paused rows due now.
UPDATE {table} FORCE INDEX (PRIMARY) SET {due} = NOW(3)
WHERE {id} IN %(ids)s AND {due} >= {parked_from}
  AND {due} <> {quarantined_due}

-- name: due_entries
-- Queue entries of these keys' rows that are due (the dispatcher reads the ids the application
-- asked for `now` at once, instead of waiting for the keyset cursor or the sweep).
SELECT GROUP_CONCAT(CONCAT({key_out}, ':',
           TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000 {group_out}) SEPARATOR ' ')
FROM {table}
WHERE {id} IN %(ids)s AND {due} <= NOW(3)

-- name: row_counts
-- The rows set aside, for status and its samples: quarantined, paused, dead (one-shot rows that
-- failed max_attempts times) and, up to %(pending_cap)s (0 for a recurring workload), one-shot
-- rows still to do (due now or later, not parked; done rows, a NULL due time, are not in the
-- range). Each a point or a range of the due index (parked rows sort last): cheap however many
-- rows are due. One statement, so one round trip for all four.
SELECT (SELECT COUNT(*) FROM {table} WHERE {due} = {quarantined_due}),
       (SELECT COUNT(*) FROM {table}
        WHERE {due} >= {parked_from} AND {due} <> {quarantined_due} AND {due} <> {dead_due}),
       (SELECT COUNT(*) FROM {table} WHERE {due} = {dead_due}),
       (SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE {due} < {parked_from} LIMIT %(pending_cap)s) AS pending)

-- name: group_limits
-- The groups with limits of their own (group_limits_table, docs/groups.md): each group named as
-- the group lists name it (the hex of its value's bytes, as {group_hex}), and its rate, room and
-- weight (NULL: the workload's). A few hundred rows at most, read every few seconds by the leader.
SELECT HEX(CAST(group_value AS BINARY)), rate_limit, max_in_flight, weight FROM {group_limits}

-- name: create_group_limits
-- The group limits table, for init-db to make (both servers accept it). group_value is compared
-- byte for byte, as groups are told apart: under a case- or accent-insensitive collation two
-- groups ('acme', 'äcme') would be one key.
CREATE TABLE {group_limits} (
  group_value VARBINARY(255) NOT NULL PRIMARY KEY,
  rate_limit DOUBLE NULL,
  max_in_flight INT UNSIGNED NULL,
  weight INT UNSIGNED NULL
)

-- name: list_dead
SELECT {id}, {fails}, {error} FROM {table}
WHERE {due} = {dead_due}
ORDER BY {id}
LIMIT %(limit)s

-- name: dead_chunk
-- `recheck retry --all-dead` and `discard --all-dead`: the keys of the next dead rows after
-- %(after)s (NULL: from the first), through the due index (one point of it, in key order), whose
-- last error contains %(error)s (NULL: any) and whose last attempt was before %(before)s (NULL:
-- any). A plain read: it locks nothing.
SELECT {id} FROM {table}
WHERE {due} = {dead_due} AND (%(after)s IS NULL OR {id} > %(after)s)
  AND (%(error)s IS NULL OR LOCATE(%(error)s, {error}) > 0)
  AND (%(before)s IS NULL OR {checked} < %(before)s)
ORDER BY {id} LIMIT %(limit)s

-- name: discard
-- `recheck discard`: dead rows taken as done (their due time cleared: never dispatched again,
-- kept with their last error until keep_done trims them). Through the primary key: it locks
-- only these rows.
UPDATE {table} FORCE INDEX (PRIMARY) SET {due} = NULL
WHERE {id} IN %(ids)s AND {due} = {dead_due}

-- name: now_minus
-- The database clock %(us)s microseconds ago (in recheck's session time zone).
SELECT NOW(3) - INTERVAL %(us)s MICROSECOND

-- name: done_chunk
-- `keep_done`: the done rows (a NULL due time) are walked in key order, %(limit)s at a time, from
-- the due index (it holds them as (NULL, key)): the keys of the next chunk after %(after)s (NULL:
-- from the first). A plain read: it locks nothing.
SELECT {id} FROM {table}
WHERE {due} IS NULL AND (%(after)s IS NULL OR {id} > %(after)s)
ORDER BY {id} LIMIT %(limit)s

-- name: trim_done_keys
-- `keep_done`: of the done rows done_chunk found, those still done and last attempted before
-- %(before)s, deleted by their keys through the primary key: the statement reads and locks those
-- rows only, never a pending row between them, nor a producer's row being inserted after them
-- (a key range did: it waited on both). Index hints need DELETE's multi-table form.
DELETE t FROM {table} AS t FORCE INDEX (PRIMARY)
WHERE t.{id} IN %(ids)s AND t.{due} IS NULL AND t.{checked} < %(before)s

-- name: adopting_any
-- A row of an adopted one-shot table not sorted yet (schema.ADOPTING_DUE), through the due index.
SELECT 1 FROM {table} WHERE {due} = {adopting_due} LIMIT 1

-- name: pending_valid
-- The operator's `pending` condition, tried before anything is altered (a typo fails here).
SELECT 1 FROM {table} WHERE COALESCE(({pending}), FALSE) LIMIT 1

-- name: adopting_chunk
-- `init-db --apply` adopting a queue table: the keys of the next rows not sorted yet after
-- %(after)s (NULL: from the first), through the due index. A plain read: it locks nothing.
SELECT {id} FROM {table}
WHERE {due} = {adopting_due} AND (%(after)s IS NULL OR {id} > %(after)s)
ORDER BY {id} LIMIT %(limit)s

-- name: adopt_pending
-- One chunk of adopting_chunk's keys, through the primary key (it locks those rows only): the
-- rows the workload's `pending` condition names are due now, the others done ({pending} is that
-- condition, from the operator's own configuration). Rows sorted already are left alone, so an
-- adoption cut short is finished by running it again.
UPDATE {table} FORCE INDEX (PRIMARY)
SET {due} = IF(COALESCE(({pending}), FALSE), NOW(3), NULL)
WHERE {id} IN %(ids)s AND {due} = {adopting_due}

-- name: one_row
-- `recheck inspect`: one row by its key, with the database clock's view of its lateness. The key
-- comes back as the table holds it: the column's collation may match 'alice' to 'Alice  ', and
-- Redis knows the row by its stored key. {group_hex}: a grouped workload's row's group, as its
-- group list is named (sql.py).
SELECT {due}, {checked}, {result}, {count}, {fails}, {error}, NOW(3),
       TIMESTAMPDIFF(MICROSECOND, {due}, NOW(3)) / 1000000,
       TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000,
       {id}, {group_hex}
FROM {table}
WHERE {id} = %(id)s

-- name: count_rows
SELECT COUNT(*) FROM {table}

-- name: freshness_counts
-- Rows due now and overdue by more than 1 s, from ONE pass over the oldest %(cap)s due entries
-- of the due index: each count is exactly min(true count, cap), since overdue rows are the
-- oldest due ones. O(cap) whatever the backlog. NOW(3) is evaluated once per statement (MySQL 8
-- and MariaDB alike), so the counts agree; the clock comes along (error groups use it), and the
-- seconds the most overdue row is past its due time (one index probe; negative: nothing is due).
SELECT COUNT(*),
       COALESCE(SUM({due} <= NOW(3) - INTERVAL 1 SECOND), 0),
       UNIX_TIMESTAMP(NOW(3)),
       (SELECT TIMESTAMPDIFF(MICROSECOND, MIN({due}), NOW(3)) / 1000000 FROM {table})
FROM (
    SELECT {due} FROM {table}
    WHERE {due} <= NOW(3)
    ORDER BY {due}
    LIMIT %(cap)s) AS due_rows

-- name: overdue_rows
-- The oldest rows overdue by more than 1 s (at most %(limit)s, through the due index): each one's
-- due time (ms, as queue entries carry it), how late it is and its own interval (us), so that
-- status can tell rows in flight with a worker from rows waiting, and judge each row by its own
-- interval. Parked rows (year 9999) are never due.
SELECT TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {due}) DIV 1000,
       TIMESTAMPDIFF(MICROSECOND, {due}, NOW(3)),
       {row_interval_us}
FROM {table}
WHERE {due} <= NOW(3) - INTERVAL 1 SECOND
ORDER BY {due}
LIMIT %(limit)s

-- name: interval_range
-- The shortest and longest interval of any row (an interval column: a scan of the table, taken
-- with the slow samples, every 30 s).
SELECT MIN(row_interval_us), MAX(row_interval_us)
FROM (SELECT {row_interval_us} AS row_interval_us FROM {table}) AS intervals

-- name: needed_rate
-- Checks per second the table asks for: one per row per its own interval, paused and
-- quarantined rows left out. A scan: `recheck config` only.
SELECT COALESCE(SUM(1000000 / ({row_interval_us})), 0) FROM {table} AS t
WHERE t.{due} < {parked_from}

-- name: count_stale
-- Rows not quarantined whose last completed check is older than %(age_us)s, or never checked.
-- A full scan (the checked column has no index): for end-of-run summaries, never for loops.
SELECT COUNT(*) FROM {table}
WHERE ({checked} IS NULL OR {checked} < NOW(3) - INTERVAL %(age_us)s MICROSECOND)
  AND {due} < {parked_from}

-- name: list_failing
-- Rows whose last check failed, with the error. A scan (fail_count has no index): sampled
-- every 30 s by the dashboard, never in a loop.
SELECT {id}, {fails}, {error} FROM {table}
WHERE {fails} > 0 AND {due} < {parked_from}
LIMIT %(limit)s

-- name: slow_counts
-- The counts a status sample takes every 30 s, in one statement: the rows (a scan of the
-- smallest index); rows never checked whose due time is more than their interval ahead (rows are
-- due at once when inserted, so these were most likely inserted from a session in another time
-- zone: a DATETIME default of CURRENT_TIMESTAMP is the session's local time), of the %(cap)s rows
-- due soonest beyond one (workload) interval, through the due index, parked rows (year 9999) not
-- counted; and rows whose last check failed (a scan, as count_failing), up to %(cap)s. Three
-- statements before: ten idle workloads' samples cost a statement a second for these alone.
-- Scalar subqueries over derived tables with their own LIMIT, as row_counts: MySQL 8 and
-- MariaDB both take them.
SELECT (SELECT COUNT(*) FROM {table}),
       (SELECT COUNT(*)
        FROM (
            SELECT {checked}, {due}, {row_interval_us} AS every_us
            FROM {table}
            WHERE {due} > NOW(3) + INTERVAL %(interval_us)s MICROSECOND
              AND {due} < {parked_from}
            ORDER BY {due}
            LIMIT %(cap)s) AS ahead
        WHERE ahead.{checked} IS NULL
          AND ahead.{due} > NOW(3) + INTERVAL ahead.every_us MICROSECOND),
       (SELECT COUNT(*) FROM (
            SELECT 1 FROM {table}
            WHERE {fails} > 0 AND {due} < {parked_from}
            LIMIT %(cap)s
        ) AS failing)

-- name: count_failing
-- Rows whose last check failed (not quarantined), counted up to %(cap)s. A scan of the table
-- (fail_count has no index): `recheck status` and the dashboard's 30 s samples, never a loop.
SELECT COUNT(*) FROM (
    SELECT 1 FROM {table}
    WHERE {fails} > 0 AND {due} < {parked_from}
    LIMIT %(cap)s
) AS failing

-- name: list_quarantined
SELECT {id}, {error} FROM {table}
WHERE {due} = {quarantined_due}
ORDER BY {id}
LIMIT %(limit)s

-- name: server_identity
-- What a server says it is, to tell two spellings of one server (127.0.0.1 and localhost, a
-- socket, a DNS alias) from two servers: SHOW VARIABLES needs no privilege and runs on both
-- MySQL 8 and MariaDB; server_uuid exists on MySQL only (MariaDB then has fewer rows).
SHOW GLOBAL VARIABLES
WHERE Variable_name IN ('hostname', 'port', 'datadir', 'server_uuid', 'lower_case_table_names')

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
    {due} DATETIME(3) {due_null} DEFAULT {due_default} COMMENT 'recheck: when the row is next due',
    {count} INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'recheck: completed checks',
    {fails} INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'recheck: consecutive failed checks',
    {error} VARCHAR(255) NULL COMMENT 'recheck: the last failure or quarantine reason',
    PRIMARY KEY ({id}),
    KEY {due_index} ({due}, {id})
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='made by recheck init-db: demo rows may be seeded here'

-- name: create_changes_table
-- The change feed of one workload table ({changes}), beside it: append-only, read by position,
-- trimmed to the workload's changes_keep. Its comment names the deployment that made it (key
-- prefix/workload, schema.feed_owner): another deployment on the same table is refused. Results of any column type and length fit (LONGTEXT:
-- a long TEXT result must never stop its row being written).
CREATE TABLE IF NOT EXISTS {changes} (
    pos BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    row_key TEXT NOT NULL,
    at DATETIME(3) NOT NULL,
    old_result LONGTEXT NULL,
    new_result LONGTEXT NULL,
    old_failing TINYINT(1) NOT NULL,
    new_failing TINYINT(1) NOT NULL,
    error TEXT NULL,
    PRIMARY KEY (pos)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='recheck: the change feed of {table} (deployment {feed_owner})'

-- name: grant_changes
-- The least-privilege user writes the feed (workers), reads it (Client.changes, `recheck
-- changes`: DELETE also lets MySQL 8 take changes_pending's locking read) and trims it (the
-- dispatcher).
GRANT SELECT, INSERT, DELETE ON {database}.{changes} TO %(user)s@'%%'

-- name: table_exists
SELECT COUNT(*) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %(table)s

-- name: table_names
-- The tables of the database, to suggest the closest one when a configured name is misspelt.
SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()

-- name: table_comment
SELECT TABLE_COMMENT FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %(table)s

-- name: table_columns
SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE, COLUMN_TYPE, DATETIME_PRECISION,
       COLUMN_COMMENT, CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_DEFAULT
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
-- Due times of one chunk spread over one interval from now (each row's own, with an interval
-- column), by a hash of the id (stable, and even whatever the ids look like), so rows that all
-- got one due time (a new due column, a bulk import) are not checked in one burst every interval.
-- Quarantined rows stay parked. A row in flight meanwhile is harmless: its write is fenced out
-- and the new due time stands.
UPDATE {table}
SET {due} = NOW(3) + INTERVAL FLOOR(CRC32({id}) / 4294967296 * {row_interval_us}) MICROSECOND
WHERE (%(after)s IS NULL OR {id} > %(after)s) AND {id} <= %(last)s
  AND {due} < {parked_from}

