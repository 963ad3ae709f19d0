"""MySQL: connections and what server errors mean (db), every statement (queries.sql + sql), the
table's shape (schema), how keys of every kind travel (keytypes) and the queue entry format
(entries). Never imports the Redis side."""
