'use client';

import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import {
  createContext,
  type ReactNode,
  useCallback,
  useContext,
  useEffect,
  useRef,
  useState,
} from 'react';
import { type Chaos, chaosFromSearch, NO_CHAOS, searchWithChaos } from '@/client/chaos';
import { createClient, TRPCProvider } from '@/client/trpc';

interface ChaosState {
  chaos: Chaos;
  setChaos: (chaos: Chaos) => void;
}

const ChaosContext = createContext<ChaosState>({ chaos: NO_CHAOS, setChaos: () => {} });

export const useChaos = () => useContext(ChaosContext);

/** TanStack Query, the tRPC client and the chaos settings, for every page. */
export function Providers({ children }: { children: ReactNode }) {
  const [chaos, setChaos] = useState(NO_CHAOS);
  // The links read the settings at send time, so a change applies to the next request.
  const chaosRef = useRef(chaos);
  chaosRef.current = chaos;
  const [queryClient] = useState(
    () =>
      new QueryClient({
        // The links retry what is safe to retry; TanStack retrying too would multiply it.
        defaultOptions: { queries: { retry: 1 }, mutations: { retry: false } },
      }),
  );
  const [trpcClient] = useState(() => createClient(() => chaosRef.current));

  // Settings from the query string (?drop=50&crash=1…), read once per page load.
  useEffect(() => {
    setChaos(chaosFromSearch(window.location.search));
  }, []);
  // …and written back to it, so a reload keeps the chaos the page showed.
  const changeChaos = useCallback((next: Chaos) => {
    setChaos(next);
    const search = searchWithChaos(window.location.search, next);
    window.history.replaceState(null, '', `${window.location.pathname}${search}`);
  }, []);

  return (
    <ChaosContext.Provider value={{ chaos, setChaos: changeChaos }}>
      <QueryClientProvider client={queryClient}>
        <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
          {children}
        </TRPCProvider>
      </QueryClientProvider>
    </ChaosContext.Provider>
  );
}
