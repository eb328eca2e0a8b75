/** mulberry32: tiny, fast and good enough to spread seed values; never Math.random. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** The seed's only source of chance: the same values, in the same order, on every machine. */
export class SeedRandom {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  /** Uniform in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }
  int(minInclusive: number, maxInclusive: number): number {
    return minInclusive + Math.floor(this.float() * (maxInclusive - minInclusive + 1));
  }
  pick<T>(values: readonly T[]): T {
    return values[Math.floor(this.float() * values.length)]!;
  }
  chance(p: number): boolean {
    return this.float() < p;
  }
  /** RFC 4122 version 4 layout (version nibble 4, variant bits 10) so every UUID parser accepts it. */
  uuid(): string {
    const bytes = new Uint8Array(16);
    for (let i = 0; i < 16; i += 4) {
      const word = this.next();
      bytes[i] = word >>> 24;
      bytes[i + 1] = (word >>> 16) & 0xff;
      bytes[i + 2] = (word >>> 8) & 0xff;
      bytes[i + 3] = word & 0xff;
    }
    bytes[6] = (bytes[6]! & 0x0f) | 0x40;
    bytes[8] = (bytes[8]! & 0x3f) | 0x80;
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
}
