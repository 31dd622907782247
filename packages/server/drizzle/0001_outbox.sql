CREATE TABLE "idem_inbox" (
	"consumer" text NOT NULL,
	"event_id" text NOT NULL,
	"processed_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "idem_inbox_pkey" PRIMARY KEY("consumer","event_id")
);
--> statement-breakpoint
CREATE TABLE "idem_outbox" (
	"seq" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "idem_outbox_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"topic" text NOT NULL,
	"aggregate_key" text,
	"payload" jsonb NOT NULL,
	"headers" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"available_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"locked_until" timestamp (3) with time zone,
	"locked_by" text,
	"sent_at" timestamp (3) with time zone,
	"dead_at" timestamp (3) with time zone
);
--> statement-breakpoint
CREATE INDEX "idem_inbox_processed_at_idx" ON "idem_inbox" USING btree ("consumer","processed_at");--> statement-breakpoint
CREATE UNIQUE INDEX "idem_outbox_id_idx" ON "idem_outbox" USING btree ("id");--> statement-breakpoint
CREATE INDEX "idem_outbox_pending_idx" ON "idem_outbox" USING btree ("seq") WHERE "idem_outbox"."sent_at" is null and "idem_outbox"."dead_at" is null;--> statement-breakpoint
CREATE INDEX "idem_outbox_aggregate_unsent_idx" ON "idem_outbox" USING btree ("aggregate_key","seq") WHERE "idem_outbox"."sent_at" is null and "idem_outbox"."aggregate_key" is not null;--> statement-breakpoint
CREATE INDEX "idem_outbox_sent_at_idx" ON "idem_outbox" USING btree ("sent_at") WHERE "idem_outbox"."sent_at" is not null;--> statement-breakpoint
CREATE INDEX "idem_outbox_dead_idx" ON "idem_outbox" USING btree ("seq") WHERE "idem_outbox"."dead_at" is not null;