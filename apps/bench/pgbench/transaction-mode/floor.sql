-- The floor: the read, then BEGIN, the plain claim INSERT, the order's INSERT, the completion UPDATE (expiry kept), COMMIT.
\set n random(1, 9000000000000)
select status, fingerprint, outcome from idem_keys where scope = 'tenant_p/transaction' and key = 'k' || :n::text || '-' || :client_id::text;
begin;
insert into idem_keys (scope, key, fingerprint, status, version, locked_until, attempts, steps, created_at, expires_at) values ('tenant_p/transaction', 'k' || :n::text || '-' || :client_id::text, 'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff', 'in_progress', 1, now() + interval '30 seconds', 1, '{}', now(), now() + interval '1 day') on conflict do nothing returning version, created_at \gset
insert into bench_orders (principal, sku, quantity, ref) values ('p', 'tea', 1, 'r') returning id;
update idem_keys set status = 'completed', outcome = '{"kind":"success","value":{"orderId":1,"sku":"tea","quantity":1}}'::json, completed_at = now(), locked_until = null where scope = 'tenant_p/transaction' and key = 'k' || :n::text || '-' || :client_id::text and version = 1 and created_at = :created_at::timestamptz and status = 'in_progress' returning version;
commit;
