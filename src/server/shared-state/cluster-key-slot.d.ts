/** cluster-key-slot (ioredis's own): a key's Redis Cluster hash slot (CRC16 of its first `{…}` tag, or of the key). */
declare module 'cluster-key-slot' {
  function generate(key: string | Buffer): number;
  export default generate;
}
