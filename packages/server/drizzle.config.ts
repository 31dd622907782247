import { defineConfig } from 'drizzle-kit';

// After `drizzle-kit generate`, `pnpm db:generate` also rewrites
// src/drizzle/migrations.generated.ts, which is what `migrate()` applies.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/drizzle/schema.ts',
  out: './drizzle',
});
