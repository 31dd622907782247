import { asc } from 'drizzle-orm';
import { products } from '../db/schema';
import { publicProcedure, router } from '../trpc';

export const shopRouter = router({
  products: publicProcedure.query(({ ctx }) =>
    ctx.runtime.db.select().from(products).orderBy(asc(products.priceCents)),
  ),
});
