export {
  createScratchDatabase,
  type ScratchDatabase,
  type ScratchDatabaseOptions,
} from './createScratchDatabase.js';
export { type FetchServer, serveFetch } from './serveFetch.js';
export {
  type NatsCluster,
  type NatsClusterNode,
  type StartNatsClusterOptions,
  startNatsCluster,
} from './startNatsCluster.js';
