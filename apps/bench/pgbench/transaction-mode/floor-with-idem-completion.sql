-- The floor with idem's completion UPDATE (without its no-row guard).
\set n random(1, 9000000000000)
select status, fingerprint, outcome from idem_keys where scope = 'tenant_p/transaction' and key = 'k' || :n::text || '-' || :client_id::text;
begin;
insert into idem_keys (scope, key, fingerprint, status, version, locked_until, attempts, steps, created_at, expires_at) values ('tenant_p/transaction', 'k' || :n::text || '-' || :client_id::text, 'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff', 'in_progress', 1, now() + interval '30 seconds', 1, '{}', now(), now() + interval '1 day') on conflict do nothing returning version, created_at \gset
insert into bench_orders (principal, sku, quantity, ref) values ('p', 'tea', 1, 'r') returning id;
update "idem_keys" set "status" = 'completed', "locked_until" = null, "outcome" = '{"kind":"success","value":{"orderId":1,"sku":"tea","quantity":1}}'::json, "completed_at" = date_trunc('milliseconds', statement_timestamp()), "expires_at" = (date_trunc('milliseconds', statement_timestamp()) + 86400000::float8 * interval '1 millisecond') where (("idem_keys"."scope" = 'tenant_p/transaction' and "idem_keys"."key" = 'k' || :n::text || '-' || :client_id::text) and "idem_keys"."version" = 1 and "idem_keys"."created_at" = to_timestamp(extract(epoch from :created_at::timestamptz)) and "idem_keys"."status" = 'in_progress') returning "version";
commit;
