export type {
  RedisClusterConnection,
  RedisConnection,
  RedisNodeConnection,
} from './RedisConnection.js';
export { type RedisStoreOptions, redisStore } from './redisStore.js';
