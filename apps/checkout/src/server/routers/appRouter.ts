import { router } from '../trpc';
import { checkoutRouter } from './checkout';
import { demoRouter } from './demo';
import { shopRouter } from './shop';

export const appRouter = router({
  shop: shopRouter,
  checkout: checkoutRouter,
  demo: demoRouter,
});

export type AppRouter = typeof appRouter;
