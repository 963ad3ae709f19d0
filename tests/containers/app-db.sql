-- The application's table, as its own migrations made it (run once, on the db's first start).
-- The least-privilege user recheck's dispatcher and workers log in as is made by the documented
-- `init-db --apply` with RECHECK_APP_USER (docs/deploying.md), not here.
CREATE TABLE monitors (
  id BIGINT PRIMARY KEY,
  url VARCHAR(200) NOT NULL,
  status VARCHAR(20) NOT NULL DEFAULT 'active'
);
INSERT INTO monitors (id, url)
  SELECT seq, CONCAT('http://target:8000/', IF(seq % 3 = 0, 'broken', 'ok')) FROM seq_1_to_30;
