'use client';

import { useSyncExternalStore } from 'react';
import { attemptLog } from '@/client/attemptLog';
import { WhatHappened } from './WhatHappened';

/** The panel for the checkout submitted last in this tab. */
export function LatestCheckoutPanel() {
  const key = useSyncExternalStore(attemptLog.subscribe, attemptLog.latestKey, () => null);
  return <WhatHappened checkoutKey={key} />;
}
