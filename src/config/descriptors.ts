import { readFileSync } from 'node:fs';

/*
 * The file-descriptor budget of a gateway process, from which MAX_CONNECTIONS's default comes
 * (config.ts): every client connection, upstream connection and open file takes one, and a
 * process out of them can neither accept a connection nor open one to the upstream.
 */

/** Connections the admin port (ADMIN_PORT) may have open at once: a probe or a scrape holds one. */
export const ADMIN_MAX_CONNECTIONS = 32;

/**
 * Descriptors a gateway process needs beside its client connections and its upstream pool:
 * stdio, libuv's own (epoll, eventfds, signal pipes), Redis, the OTLP exporter's connections,
 * files read at run time, and the admin port's connections. An idle gateway holds 22 of them
 * (the embedded upstream's listener included); the rest is room.
 */
export const RESERVED_DESCRIPTORS = 64 + ADMIN_MAX_CONNECTIONS;

/** The limit assumed where /proc/self/limits cannot be read (not Linux): the usual soft limit. */
export const FALLBACK_DESCRIPTOR_LIMIT = 1_024;

/**
 * The file descriptors this process may have open: the soft RLIMIT_NOFILE, "Max open files" in
 * /proc/self/limits (Node raises it to the hard limit as it starts); FALLBACK_DESCRIPTOR_LIMIT
 * where that cannot be read.
 */
export function descriptorLimit(readLimits: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number {
  try {
    const soft = /^Max open files\s+(\d+)/m.exec(readLimits())?.[1];
    if (soft !== undefined) return Number(soft);
  } catch {
    // No /proc: not Linux, or not mounted.
  }
  return FALLBACK_DESCRIPTOR_LIMIT;
}

/**
 * The descriptors `limit` leaves for client connections beside the upstream pool (counted twice
 * when the embedded reference upstream serves it from this process) and RESERVED_DESCRIPTORS;
 * zero or less when it leaves none.
 */
export function descriptorsForClients(limit: number, upstreamConnections: number, embeddedUpstream: boolean): number {
  return limit - upstreamConnections * (embeddedUpstream ? 2 : 1) - RESERVED_DESCRIPTORS;
}
