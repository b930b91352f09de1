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
    out = new Uint8Array(h.length / 2)
    for (let i = 0; i < out.length; i++) out[i] = parseInt(h.substr(i * 2, 2), 16)
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

/** The two lowercase hex digits of each byte value. */
const hexByte = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))

/** b in lowercase hex, without 0x (as bee-js's Bytes.toHex). */
export function hex(b: Uint8Array): string {
  let s = ''
  for (let i = 0; i < b.length; i++) s += hexByte[b[i]]
  return s
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
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
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
