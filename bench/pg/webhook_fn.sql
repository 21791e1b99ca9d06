-- model.sql's transaction in one round trip: schema.sql's
-- webhook_capture runs the same statements in the server, and the one
-- statement is its own transaction (one commit). Variables as in
-- model.sql.
\set n :n + 1
\set k 10000000 + :client_id * :stride + :n - 1
\set amount 1000 + :k % 9000
\set shard :k % :shards
SELECT webhook_capture(:k, :amount, :shard);
