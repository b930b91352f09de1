import { hex } from './bytes.js'
import { frameString, frameUint } from './json.js'

/** The SOC fields an outbound frame may carry (swarm-soc-fields), in the node's spelling. */
export type Field = 'address' | 'recoveredPubKey' | 'identifier' | 'signature' | 'wrappedAddress' | 'span' | 'index' | 'payload'

const fieldSizes: Record<string, number> = {
  address: 32,
  recoveredpubkey: 33,
  identifier: 32,
  signature: 65,
  wrappedaddress: 32,
  span: 8,
  index: 8,
}

const canonical: Record<string, Field> = {
  address: 'address',
  recoveredpubkey: 'recoveredPubKey',
  identifier: 'identifier',
  signature: 'signature',
  wrappedaddress: 'wrappedAddress',
  span: 'span',
  index: 'index',
  payload: 'payload',
}

/** Field names as the node writes them back (the ready frame's `fields`), canonical. */
export function parseFields(s: string): Field[] {
  return s
    .split(',')
    .map((f) => f.trim().toLowerCase())
    .filter((f) => f !== '')
    .map((f) => {
      const c = canonical[f]
      if (!c) throw new SyntaxError(`unknown field ${f}`)
      return c
    })
}

/** One message of the cohort, as a binary frame carried it: each field present when the session's fields name it. */
export interface Message {
  /** The frame as received. */
  raw: Uint8Array
  address?: Uint8Array
  /** The owner's compressed public key. */
  recoveredPubKey?: Uint8Array
  /** The signed SOC id: a session-feed id keccak256(keccak256(topic ‖ challenge) ‖ index) under explicit authorship and `publishers: all`, the binding's own id under implicit authorship. */
  identifier?: Uint8Array
  signature?: Uint8Array
  wrappedAddress?: Uint8Array
  /** 8 bytes, little-endian. */
  span?: Uint8Array
  /** The index of the chunk on its publisher's feed (the Broadcast's index), where the frame carries one. */
  index?: bigint
  payload?: Uint8Array
  /** The author's address (hex), where the client can tell: from recoveredPubKey, or the address field and the cohort's known publishers. */
  owner?: string
  /** Whether storage recovered it (it follows a `recovered` event) rather than the live stream. */
  recovered: boolean
}

/** Decodes a binary frame by the session's fields, in order; a short frame leaves the fields past its end unset. */
export function decodeMessage(b: Uint8Array, fields: Field[]): Message {
  const m: Message = { raw: b, recovered: false }
  let off = 0
  for (const f of fields) {
    if (f === 'payload') {
      m.payload = b.subarray(Math.min(off, b.length))
      break
    }
    const n = fieldSizes[f.toLowerCase()]
    if (off + n > b.length) break
    const v = b.subarray(off, off + n)
    off += n
    switch (f) {
      case 'index':
        m.index = new DataView(v.buffer, v.byteOffset, 8).getBigUint64(0, false)
        break
      default:
        m[f] = v
    }
  }
  return m
}

/** The node's `ready` frame. */
export interface ReadyEvent {
  role: 'subscriber' | 'publisher'
  topic: string
  binding: string
  broker: string
  addr?: string
  /** The `index` the session opened with, echoed (the client's own cursor hint; the node does nothing with it). */
  index?: bigint
  fields: string
  /** A publishing session's stream challenge (hex), the one its frames are signed under. */
  challenge?: string
  /** Which stream of the session (1, 2, … after each rejoin of the broker). */
  seq?: number
}

/**
 * The node's `challenge` frame: the publishing session's stream to the
 * broker has this challenge; every chunk is signed under it (a new one
 * after each rejoin, seq + 1).
 */
export interface ChallengeEvent {
  challenge: string
  seq: number
  topic: string
  addr: string
  broker: string
}

/**
 * The node's `stale` frame: a frame the dApp signed under an earlier
 * challenge was not sent. The session re-signs the same payload at the same
 * index under the latest challenge and sends it again (`resent`), if it
 * still holds the payload; else the update is lost (`resent: false`).
 */
export interface StaleEvent {
  kind: string
  index: bigint
  seq: number
  resent: boolean
}

/** The node's `waiting` frame: a publishing session may not publish, yet or any more. */
export interface WaitingEvent {
  addr: string
  reason: string
}

/** A service frame: an update of the admin's service feed, as the node verified it. */
export interface ServiceEvent {
  kind: 'ROSTER' | 'EOS'
  /** The index on its kind's feed (EOS: 0). */
  index: bigint
  /** The roster as of index, hex addresses, the admin not listed; [] for EOS. */
  publishers: string[]
  /** Earlier service updates never reached the node (withholding, surfaced). */
  gap: boolean
}

/** `recovered`: updates from…to of addr's feed, from storage, follow as messages. `gap`: they were missed and are not recovered. */
export interface RangeEvent {
  addr: string
  from: bigint
  to: bigint
}

/** The pot profile's anchor check failed: the owner signed two histories. */
export interface EquivocationEvent {
  addr: string
  index: bigint
  top: bigint
  reason: string
}

const lowerHex = (s: string) => s.replace(/^0x/, '').toLowerCase()

export function readyEvent(f: Record<string, unknown>): ReadyEvent {
  const role = frameString(f.role, 'ready.role')
  if (role !== 'subscriber' && role !== 'publisher') throw new SyntaxError(`ready.role: ${role}`)
  return {
    role,
    topic: lowerHex(frameString(f.topic ?? '', 'ready.topic')),
    binding: frameString(f.binding ?? '', 'ready.binding'),
    broker: lowerHex(frameString(f.broker ?? '', 'ready.broker')),
    addr: f.addr === undefined ? undefined : lowerHex(frameString(f.addr, 'ready.addr')),
    index: f.index === undefined ? undefined : frameUint(f.index, 'ready.index'),
    fields: frameString(f.fields ?? 'payload', 'ready.fields'),
    challenge: f.challenge === undefined ? undefined : challengeHex(f.challenge, 'ready.challenge'),
    seq: f.seq === undefined ? undefined : frameSeq(f.seq, 'ready.seq'),
  }
}

function challengeHex(v: unknown, what: string): string {
  const s = lowerHex(frameString(v, what))
  if (!/^[0-9a-f]{64}$/.test(s)) throw new SyntaxError(`${what}: ${s} is not 32 bytes of hex`)
  return s
}

function frameSeq(v: unknown, what: string): number {
  const n = frameUint(v, what)
  if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw new SyntaxError(`${what}: ${n} is too large`)
  return Number(n)
}

export function challengeEvent(f: Record<string, unknown>): ChallengeEvent {
  return {
    challenge: challengeHex(f.challenge, 'challenge.challenge'),
    seq: frameSeq(f.seq, 'challenge.seq'),
    topic: lowerHex(frameString(f.topic ?? '', 'challenge.topic')),
    addr: lowerHex(frameString(f.addr ?? '', 'challenge.addr')),
    broker: lowerHex(frameString(f.broker ?? '', 'challenge.broker')),
  }
}

/** A stale frame, read: its kind's name, index and seq. */
export function staleFrame(f: Record<string, unknown>): { kind: string; index: bigint; seq: number } {
  return {
    kind: frameString(f.kind ?? 'DATA', 'stale.kind'),
    index: frameUint(f.index, 'stale.index'),
    seq: f.seq === undefined ? 0 : frameSeq(f.seq, 'stale.seq'),
  }
}

export function serviceEvent(f: Record<string, unknown>): ServiceEvent {
  let kind = frameString(f.kind, 'service.kind')
  if (kind === 'END_OF_STREAM') kind = 'EOS' // the rev 3 node's name
  if (kind !== 'ROSTER' && kind !== 'EOS') throw new SyntaxError(`service.kind: ${kind}`)
  const pubs = f.publishers ?? []
  if (!Array.isArray(pubs)) throw new SyntaxError('service.publishers: not an array')
  return {
    kind,
    index: frameUint(f.index, 'service.index'),
    publishers: pubs.map((p) => {
      const s = lowerHex(frameString(p, 'service.publishers[]'))
      if (!/^[0-9a-f]{40}$/.test(s)) throw new SyntaxError(`service.publishers: ${s} is not an address`)
      return s
    }),
    gap: f.gap === true,
  }
}

export function rangeEvent(f: Record<string, unknown>, what: string): RangeEvent {
  return {
    addr: lowerHex(frameString(f.addr, `${what}.addr`)),
    from: frameUint(f.from, `${what}.from`),
    to: frameUint(f.to, `${what}.to`),
  }
}

export function equivocationEvent(f: Record<string, unknown>): EquivocationEvent {
  return {
    addr: lowerHex(frameString(f.addr, 'equivocation.addr')),
    index: frameUint(f.index, 'equivocation.index'),
    top: frameUint(f.top, 'equivocation.top'),
    reason: typeof f.reason === 'string' ? f.reason : '',
  }
}

export { hex }
