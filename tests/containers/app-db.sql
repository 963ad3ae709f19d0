-- The application's table, as its own migrations made it, and the least-privilege user of
-- docs/security.md for recheck's dispatcher and workers (run once, on the db's first start).
CREATE TABLE monitors (
  id BIGINT PRIMARY KEY,
  url VARCHAR(200) NOT NULL,
  status VARCHAR(20) NOT NULL DEFAULT 'active'
);
INSERT INTO monitors (id, url)
  SELECT seq, CONCAT('http://target:8000/', IF(seq % 3 = 0, 'broken', 'ok')) FROM seq_1_to_30;
CREATE USER 'recheck'@'%' IDENTIFIED BY 'recheck-app-pw';
GRANT SELECT, UPDATE ON app.monitors TO 'recheck'@'%';
