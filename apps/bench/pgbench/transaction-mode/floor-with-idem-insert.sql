-- The floor with idem's claim INSERT, without its key lock.
\set n random(1, 9000000000000)
select status, fingerprint, outcome from idem_keys where scope = 'tenant_p/transaction' and key = 'k' || :n::text || '-' || :client_id::text;
begin;
insert into "idem_keys" ("scope", "key", "fingerprint", "status", "version", "locked_until", "attempts", "outcome", "steps", "created_at", "completed_at", "expires_at") values ('tenant_p/transaction', 'k' || :n::text || '-' || :client_id::text, 'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff', 'in_progress', 1, (date_trunc('milliseconds', statement_timestamp()) + 30000::float8 * interval '1 millisecond'), 1, null, '{}'::jsonb, date_trunc('milliseconds', statement_timestamp()), null, (date_trunc('milliseconds', statement_timestamp()) + 86400000::float8 * interval '1 millisecond')) on conflict ("scope","key") do nothing returning (extract(epoch from "idem_keys"."created_at") * 1000)::bigint as "created_at_ms", null as restored \gset
insert into bench_orders (principal, sku, quantity, ref) values ('p', 'tea', 1, 'r') returning id;
update idem_keys set status = 'completed', outcome = '{"kind":"success","value":{"orderId":1,"sku":"tea","quantity":1}}'::json, completed_at = now(), locked_until = null where scope = 'tenant_p/transaction' and key = 'k' || :n::text || '-' || :client_id::text and version = 1 and created_at = to_timestamp(:created_at_ms::float8 / 1000) and status = 'in_progress' returning version;
commit;
