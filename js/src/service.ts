import { PrivateKey } from '@ethersphere/bee-js'
import { BytesLike, hex, toBytes } from './bytes.js'
import { ValidationError } from './errors.js'
import { encodeRoster, Kind, kindId, signChunk, socData } from './sessionfeed.js'
import { HeldSigner, SignedSOC, toSigner } from './soc.js'

/**
 * A message of the admin's service feeds (SWIP-60 rev 14): a roster, or the
 * end of the stream. Each kind is its own session feed under the challenge
 * of one of the admin's streams (docs/protocol.md, "Service feeds").
 */
export interface ServiceMessage {
  kind: 'ROSTER' | 'EOS'
  /** ROSTER: its feed's index, 0 first, each update past the latest (never reused). EOS: 0. */
  index: bigint
  /** ROSTER: the full set of publishers as of index (20-byte addresses), the admin implied. */
  publishers?: BytesLike[]
}

/** The kind's number and its payload; refuses what no broker takes. */
function serviceChunkParts(m: ServiceMessage): { kind: number; payload: Uint8Array } {
  if (m.kind === 'ROSTER') return { kind: Kind.ROSTER, payload: encodeRoster(m.publishers ?? []) }
  if (m.kind === 'EOS') {
    if ((m.publishers ?? []).length > 0) throw new ValidationError('EOS names no publishers')
    if (m.index !== 0n) throw new ValidationError(`EOS is at index 0 only, not ${m.index}`)
    return { kind: Kind.EOS, payload: new Uint8Array(0) }
  }
  throw new ValidationError(`service kind ${String(m.kind)}: want ROSTER or EOS`)
}

/**
 * The ROSTER or EOS chunk signed by the admin under the challenge of one of
 * its streams: id = the kind's session-feed id at m.index.
 */
export function serviceChunkWith(admin: HeldSigner, topic: Uint8Array, challenge: BytesLike, m: ServiceMessage): SignedSOC | Promise<SignedSOC> {
  const { kind, payload } = serviceChunkParts(m)
  return signChunk(admin, kindId(kind, topic, challenge, m.index), payload)
}

/**
 * The JSON body of POST /pubsub/{topic}/service (docs/api.md):
 * {"kind","index","challenge","soc"}, the soc id ‖ signature ‖ span ‖
 * payload in hex; the index written as a JSON integer, exact.
 */
export function serviceRequest(m: ServiceMessage, challenge: BytesLike, soc: SignedSOC): string {
  const ch = hex(toBytes(challenge, 32, 'challenge'))
  return `{"kind":"${m.kind}","index":${m.index.toString()},"challenge":"${ch}","soc":"${hex(socData(soc))}"}`
}

/** serviceRequest signed by any signer (the admin's). */
export async function serviceBodyWith(admin: HeldSigner, topic: Uint8Array, challenge: BytesLike, m: ServiceMessage): Promise<string> {
  return serviceRequest(m, challenge, await serviceChunkWith(admin, topic, challenge, m))
}

/** serviceBodyWith with the admin's key. */
export function serviceBody(admin: PrivateKey | BytesLike, topic: Uint8Array, challenge: BytesLike, m: ServiceMessage): Promise<string> {
  return serviceBodyWith(toSigner(admin), topic, challenge, m)
}
