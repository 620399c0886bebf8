import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/** The longest holder `defaultHolder()` makes, in bytes. */
const HOLDER_MAX_BYTES = 45;

/**
 * A holder name unique to this call: `<host>:<pid>:<random>` (the machine's
 * hostname, this process's id, 8 lowercase hex characters from the CSPRNG),
 * at most 45 bytes (the host part is cut).  Every lease, session and election
 * made without a `holder` gets a new one; choose a holder yourself only when
 * a restarted process must resume its own lease.
 */
export function defaultHolder(): string {
  return holderOf(hostname() || 'localhost', process.pid, randomBytes(4).toString('hex'));
}

/** @internal `<host>:<pid>:<random>`, the host cut (by whole characters) to keep it within 45 bytes. */
export function holderOf(host: string, pid: number, random: string): string {
  const tail = `:${pid}:${random}`;
  const chars = [...host];
  while (chars.length > 0 && Buffer.byteLength(chars.join('') + tail) > HOLDER_MAX_BYTES) chars.pop();
  return chars.join('') + tail;
}

/** The `holder` option checked: a non-empty string, or absent (null, undefined) for `defaultHolder()`. */
export function holderOption(holder: unknown, what = 'holder'): string {
  if (holder === undefined || holder === null) return defaultHolder();
  if (typeof holder !== 'string' || holder === '')
    throw new TypeError(`${what} must be a non-empty string, or left out for the default identity (host:pid:random)`);
  return holder;
}

/** Where a lost lease is reported: `console` unless an option says otherwise. */
export interface Logger {
  warn(message: string): void;
}

/** The `logger` option checked: an object with a `warn(message)` method, or absent (console). */
export function loggerOption(logger: unknown): Logger {
  if (logger === undefined || logger === null) return console;
  if (typeof (logger as Logger).warn !== 'function') throw new TypeError('logger must have a warn(message) method');
  return logger as Logger;
}
