// The session feeds of SWIP-74 Rev 8 and SWIP-60 rev 14 (docs/protocol.md,
// "The session feed"): under explicit authorship and `publishers: 'all'`
// every chunk a publisher signs is an update of a feed on the cohort's topic
// salted with its stream's challenge, one feed per kind:
//
//   prefix  = (empty)                         kind DATA
//           = "bps-service:v1" ‖ byte(kind)   AUTH, ROSTER, EOS
//   topic_s = keccak256(prefix ‖ topic ‖ challenge)
//   id      = keccak256(topic_s ‖ uint64BE(index))
//
// and the update for storage (SWIP-65) is the same payload under the
// channel's own id keccak256(topic ‖ uint64BE(index)). The client derives
// every id itself, from the challenge the node hands it and the topic it
// opened: it never signs an id the node names. pkg/bps/sessionfeed is the Go
// side; the unit tests pin its vectors.
import { BytesLike, concat, toBytes, uint64BE, utf8 } from './bytes.js'
import { ValidationError } from './errors.js'
import { feedId, HeldSigner, keccak, SignedSOC, signSOCWith } from './soc.js'

/** The kinds of the Rev 8 wire: DATA and AUTH SWIP-74 Rev 8's, ROSTER and EOS this project's numbers for SWIP-60 rev 14's two. */
export const Kind = { DATA: 1, AUTH: 2, ROSTER: 3, EOS: 4 } as const
export type KindName = keyof typeof Kind

/** The kind's name (DATA, AUTH, ROSTER, EOS), or KIND(n). */
export function kindName(kind: number): string {
  for (const [n, v] of Object.entries(Kind)) if (v === kind) return n
  return `KIND(${kind})`
}

/** The highest index a chunk may carry: the broker's cursor is index + 1 and must not wrap. */
export const MAX_INDEX = (1n << 64n) - 2n

const servicePrefix = utf8('bps-service:v1')

/** The prefix of kind's session feed: empty for DATA, "bps-service:v1" ‖ byte(kind) for every other kind. */
export function kindPrefix(kind: number): Uint8Array {
  if (!Number.isInteger(kind) || kind < 1 || kind > 255) throw new ValidationError(`kind ${kind}: no session feed`)
  return kind === Kind.DATA ? new Uint8Array(0) : concat(servicePrefix, Uint8Array.of(kind))
}

/** A session feed's topic: keccak256(prefix ‖ topic ‖ challenge), topic and challenge 32 bytes each. */
export function sessionTopic(prefix: Uint8Array, topic: BytesLike, challenge: BytesLike): Uint8Array {
  return keccak(prefix, toBytes(topic, 32, 'topic'), toBytes(challenge, 32, 'challenge'))
}

/** The id of update index of the feed on topicS: keccak256(topicS ‖ uint64BE(index)). */
export function sessionId(topicS: Uint8Array, index: bigint): Uint8Array {
  return keccak(topicS, uint64BE(index))
}

/** The id a chunk of kind at index has on the stream whose challenge is challenge, in the cohort on topic. */
export function kindId(kind: number, topic: BytesLike, challenge: BytesLike, index: bigint): Uint8Array {
  return sessionId(sessionTopic(kindPrefix(kind), topic, challenge), index)
}

/** The channel's own update id keccak256(topic ‖ uint64BE(index)): SWIP-65's update for storage, and an implicit feed's chunk. */
export function channelId(topic: BytesLike, index: bigint): Uint8Array {
  return feedId(toBytes(topic, 32, 'topic'), index)
}

/**
 * The wrapped address of the empty chunk (span 0, no payload): keccak256 of
 * a zero span and the BMT root of 4096 zero bytes. The chunk of every AUTH
 * and EOS, and of a ROSTER naming nobody.
 */
function emptyChunkAddress(): Uint8Array {
  if (!emptyAddress) {
    let h: Uint8Array = new Uint8Array(32)
    for (let depth = 0; depth < 7; depth++) h = keccak(h, h)
    emptyAddress = keccak(new Uint8Array(8), h)
  }
  return emptyAddress
}
let emptyAddress: Uint8Array | undefined

/**
 * Signs payload (0 to 4096 bytes) as the SOC under id: signSOCWith for a
 * payload, and the same for the empty chunk, which bee-js's content-addressed
 * chunk does not make. One signature, by the session's signer, over
 * id ‖ the wrapped chunk's address, as bee's soc package checks.
 */
export function signChunk(signer: HeldSigner, id: Uint8Array, payload: Uint8Array): SignedSOC | Promise<SignedSOC> {
  if (payload.length > 0) return signSOCWith(signer, id, payload)
  const wrappedAddress = emptyChunkAddress()
  const make = (signature: Uint8Array): SignedSOC => {
    if (signature.length !== 65) throw new ValidationError(`signer: a signature is 65 bytes, got ${signature.length}`)
    return { address: keccak(id, signer.address), identifier: id.slice(), signature, span: new Uint8Array(8), payload: new Uint8Array(0), wrappedAddress }
  }
  const sig = signer.sign(concat(id, wrappedAddress))
  return sig instanceof Uint8Array ? make(sig) : Promise.resolve(sig).then((s) => make(new Uint8Array(s)))
}

/** The chunk's data as on the wire: id(32) ‖ signature(65) ‖ span(8, LE) ‖ payload. */
export function socData(soc: SignedSOC): Uint8Array {
  return concat(soc.identifier, soc.signature, soc.span, soc.payload)
}

/**
 * An inbound binary frame of the bridge (docs/api.md): kind(1) ‖ index(8,
 * BE) ‖ soc, and for a persistent session's DATA the storage update's
 * signature(65) before the soc.
 */
export function inboundFrame(kind: number, index: bigint, soc: SignedSOC, storageSignature?: Uint8Array): Uint8Array {
  const parts = [Uint8Array.of(kind), uint64BE(index), ...(storageSignature ? [storageSignature] : []), soc.identifier, soc.signature, soc.span, soc.payload]
  return concat(...parts)
}

/**
 * A ROSTER chunk's payload: the protobuf Roster{repeated bytes publishers =
 * 1}, each a 20-byte address, the admin implied (docs/protocol.md). One
 * field: a protobuf package would be the larger dependency.
 */
export function encodeRoster(publishers: BytesLike[]): Uint8Array {
  if (publishers.length > 186) throw new ValidationError(`a roster names at most 186 publishers, got ${publishers.length}`)
  return concat(...publishers.map((p) => concat(Uint8Array.of(0x0a, 20), toBytes(p, 20, 'publisher'))))
}
