import { PrivateKey } from '@ethersphere/bee-js'
import { BytesLike, concat, toBytes, uint64BE, utf8 } from './bytes.js'
import { ValidationError } from './errors.js'
import { HeldSigner, keccak, signSOC, signSOCWith } from './soc.js'

/** A service message of the admin's service feed (SWIP-60): a roster, or the end of the stream. */
export interface ServiceMessage {
  kind: 'ROSTER' | 'END_OF_STREAM'
  /** The service feed's index: 0 first, each update one past the latest. */
  index: bigint
  /** ROSTER: the full set of publishers as of index (20-byte addresses), the admin not included. */
  publishers?: BytesLike[]
}

const serviceDomain = utf8('bps-service:v1')

/** The id of update index of a cohort's service feed: keccak256("bps-service:v1" ‖ topic ‖ uint64BE(index)). */
export function serviceId(topic: Uint8Array, index: bigint): Uint8Array {
  return keccak(serviceDomain, topic, uint64BE(index))
}

function varint(n: bigint): number[] {
  const out: number[] = []
  while (n >= 0x80n) {
    out.push(Number(n & 0x7fn) | 0x80)
    n >>= 7n
  }
  out.push(Number(n))
  return out
}

/**
 * The protobuf ServiceMessage (pkg/bps/pb: kind = 1, index = 2, publishers =
 * 3), encoded as proto3 does (zero values omitted). Three fields: a protobuf
 * package would be the larger dependency.
 */
export function encodeServiceMessage(m: ServiceMessage): Uint8Array {
  const kind = m.kind === 'ROSTER' ? 1n : m.kind === 'END_OF_STREAM' ? 2n : undefined
  if (kind === undefined) throw new ValidationError(`service kind ${String(m.kind)}: want ROSTER or END_OF_STREAM`)
  const out: number[] = [0x08, ...varint(kind)]
  if (m.index > 0n) out.push(0x10, ...varint(m.index))
  const pubs = m.publishers ?? []
  if (m.kind === 'END_OF_STREAM' && pubs.length > 0) throw new ValidationError('END_OF_STREAM names no publishers')
  for (const p of pubs) {
    out.push(0x1a, 20, ...toBytes(p, 20, 'publisher'))
  }
  return new Uint8Array(out)
}

/**
 * The body of POST /pubsub/{topic}/service: the service SOC without its
 * address, id ‖ signature ‖ span ‖ payload, signed by the admin's key with
 * bee-js under serviceId(topic, index).
 */
export function serviceBody(admin: PrivateKey, topic: Uint8Array, m: ServiceMessage): Uint8Array {
  const soc = signSOC(admin, serviceId(topic, m.index), encodeServiceMessage(m))
  return concat(soc.identifier, soc.signature, soc.span, soc.payload)
}

/** serviceBody signed by any signer (the admin's). */
export async function serviceBodyWith(admin: HeldSigner, topic: Uint8Array, m: ServiceMessage): Promise<Uint8Array> {
  const soc = await signSOCWith(admin, serviceId(topic, m.index), encodeServiceMessage(m))
  return concat(soc.identifier, soc.signature, soc.span, soc.payload)
}
