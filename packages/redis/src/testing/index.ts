export {
  type RedisCluster,
  type RedisServer,
  type StartRedisClusterOptions,
  type StartRedisOptions,
  startRedisCluster,
  startRedisServer,
} from './startRedis.js';
