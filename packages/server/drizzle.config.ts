import { defineConfig } from 'drizzle-kit';

// After `drizzle-kit generate`, `pnpm db:generate` also rewrites
// src/postgres/migrations.generated.ts, which is what `migrate()` applies.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/postgres/schema.ts',
  out: './drizzle',
});
