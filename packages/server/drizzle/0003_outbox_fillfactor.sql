-- Room on every page of the outbox, so that a relay's lease (an UPDATE of locked_until and
-- locked_by, columns no index covers) can be a HOT update: a new row version on the same
-- page and no new index entries. Each event is written three times (insert, lease, sent);
-- this makes the lease the cheap one. Existing pages keep their layout until rewritten.
ALTER TABLE "idem_outbox" SET (fillfactor = 50);
