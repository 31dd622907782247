CREATE TABLE "idem_keys" (
	"scope" text NOT NULL,
	"key" text NOT NULL,
	"fingerprint" text NOT NULL,
	"status" text NOT NULL,
	"version" integer NOT NULL,
	"locked_until" timestamp (3) with time zone,
	"attempts" integer NOT NULL,
	"outcome" jsonb,
	"steps" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	"completed_at" timestamp (3) with time zone,
	"expires_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "idem_keys_pkey" PRIMARY KEY("scope","key"),
	CONSTRAINT "idem_keys_status_check" CHECK ("idem_keys"."status" in ('in_progress', 'completed'))
);
--> statement-breakpoint
CREATE INDEX "idem_keys_expires_at_idx" ON "idem_keys" USING btree ("expires_at");