export {
  type NatsCluster,
  type NatsClusterNode,
  type StartNatsClusterOptions,
  startNatsCluster,
} from '../outbox/testing/startNatsCluster.js';
export { type FetchServer, serveFetch } from './serveFetch.js';
