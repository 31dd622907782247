export {
  type FaultyFetch,
  type FaultyFetchCounters,
  type FaultyFetchInit,
  type FaultyFetchOptions,
  type FetchFunction,
  faultyFetch,
} from './faultyFetch.js';
