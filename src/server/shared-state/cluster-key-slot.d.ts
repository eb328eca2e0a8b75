/**
 * cluster-key-slot (ioredis's own): the Redis Cluster hash slot of a key, as Redis computes it (CRC16 of its first
 * `{…}` tag, or of the key).
 */
declare module 'cluster-key-slot' {
  function generate(key: string | Buffer): number;
  export default generate;
}
