import { Bytes } from '@ethersphere/bee-js'
import { ValidationError } from './errors.js'

/** Anything this client takes as bytes: a Uint8Array, a bee-js Bytes, or hex (0x optional). */
export type BytesLike = Uint8Array | Bytes | string

/** b as exactly n bytes; what names the argument in the error. */
export function toBytes(b: BytesLike, n: number | undefined, what: string): Uint8Array {
  let out: Uint8Array
  if (typeof b === 'string') {
    const h = b.startsWith('0x') || b.startsWith('0X') ? b.slice(2) : b
    if (!/^([0-9a-fA-F]{2})*$/.test(h)) throw new ValidationError(`${what}: not hex: ${b}`)
    out = new Bytes(h).toUint8Array()
  } else if (b instanceof Uint8Array) {
    out = b
  } else if (b instanceof Bytes) {
    out = b.toUint8Array()
  } else {
    throw new ValidationError(`${what}: want bytes or hex`)
  }
  if (n !== undefined && out.length !== n) throw new ValidationError(`${what}: ${out.length} bytes, want ${n}`)
  return out
}

export function hex(b: Uint8Array): string {
  return new Bytes(b).toHex()
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let off = 0
  for (const p of parts) {
    out.set(p, off)
    off += p.length
  }
  return out
}

export function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i])
}

export const MAX_UINT64 = (1n << 64n) - 1n

/**
 * An unsigned 64-bit integer from a bigint, a safe integer number, or a
 * decimal string (how the node writes indices: a JSON number today, a
 * decimal string tomorrow).
 */
export function toUint64(v: bigint | number | string, what: string): bigint {
  let n: bigint
  if (typeof v === 'bigint') n = v
  else if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new ValidationError(`${what}: ${v} is not a safe integer: give a bigint or a decimal string`)
    n = BigInt(v)
  } else if (typeof v === 'string' && /^\d+$/.test(v)) n = BigInt(v)
  else throw new ValidationError(`${what}: ${String(v)} is not an unsigned integer`)
  if (n < 0n || n > MAX_UINT64) throw new ValidationError(`${what}: ${n} is out of the uint64 range`)
  return n
}

/** index as 8 bytes, big-endian. */
export function uint64BE(index: bigint): Uint8Array {
  const out = new Uint8Array(8)
  new DataView(out.buffer).setBigUint64(0, index, false)
  return out
}

const encoder = new TextEncoder()
export function utf8(s: string): Uint8Array {
  return encoder.encode(s)
}
