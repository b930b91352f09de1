import { EthAddress } from '@ethersphere/bee-js'
import { BytesLike, hex, toBytes } from './bytes.js'
import { ValidationError } from './errors.js'
import { topicBytes } from './topic.js'

/** SWIP-60's topic bindings, as the node's binding parameter names them. */
export type Binding = 'anchor' | 'soc_id' | 'owner' | 'feed' | 'mnemonic'

const bindings: readonly Binding[] = ['anchor', 'soc_id', 'owner', 'feed', 'mnemonic']

/**
 * A cohort: its topic and SWIP-60 spec. The spec is the cohort's identity: two
 * specs differing in any field are two cohorts, even on one topic.
 *
 * The five configurations (docs/api.md):
 * - jam: `binding`, `admin`, `closed: true`
 * - spectator-jam: `binding`, `admin`
 * - live-stream: `binding: 'feed'`, `admin`
 * - group-chat: `binding: 'mnemonic'`, `admin`, `publishers: 'all'`
 * - implicit: `binding`, no `admin`
 *
 * No `binding` at all is the GSOC client's session: the implicit ANCHOR
 * cohort of the SOC address `topic`, binary frames only.
 */
export interface Cohort {
  /** 64 hex characters (0x optional), 32 bytes, or a name hashed with keccak256. */
  topic: string | Uint8Array
  /** Absent: the GSOC client's session. */
  binding?: Binding
  /** The admin's address: explicit authorship, the owner of the service feed. */
  admin?: BytesLike | EthAddress
  /** 'all': a group chat, anyone attached publishes (with admin; any binding, 'mnemonic' by custom). */
  publishers?: 'all'
  /** A closed cohort (a jam): no audience, only publishers attend. */
  closed?: boolean
  /** SWIP-60 history (binding 'feed' with an admin): receivers get each feed from index 0, recovered from storage. */
  history?: boolean
  /**
   * SWIP-65's pot profile (binding 'feed'): a publisher's payloads must be its
   * feed's pot nodes, which this client does not build; receiving works.
   */
  pot?: boolean
}

/** A cohort checked and in bytes. */
export interface ResolvedCohort {
  topic: Uint8Array
  binding?: Binding
  admin?: Uint8Array
  publishers?: 'all'
  closed: boolean
  history: boolean
  pot: boolean
}

export function resolveCohort(c: Cohort): ResolvedCohort {
  if (!c || typeof c !== 'object') throw new ValidationError('cohort: want an object with a topic')
  const topic = topicBytes(c.topic)
  let binding: Binding | undefined
  if (c.binding !== undefined) {
    const b = String(c.binding).toLowerCase()
    binding = (b === 'socid' ? 'soc_id' : b) as Binding
    if (!bindings.includes(binding)) throw new ValidationError(`cohort.binding: ${c.binding}: want one of ${bindings.join(', ')}`)
  }
  const admin =
    c.admin === undefined ? undefined : c.admin instanceof EthAddress ? c.admin.toUint8Array() : toBytes(c.admin, 20, 'cohort.admin')
  const r: ResolvedCohort = { topic, binding, admin, publishers: c.publishers, closed: !!c.closed, history: !!c.history, pot: !!c.pot }
  if (c.publishers !== undefined && c.publishers !== 'all') throw new ValidationError(`cohort.publishers: ${c.publishers}: only 'all'`)
  if (binding === undefined) {
    if (admin || c.publishers || c.closed || c.history || c.pot) {
      throw new ValidationError('cohort: the GSOC session (no binding) takes no admin, publishers, closed, history or pot')
    }
    return r
  }
  // What the node serves (bps.NewSpec), checked here to say so sooner; the
  // node checks again.
  // Rev 8: under ALL every chunk is a session-feed chunk, whatever the
  // binding, which only names the cohort.
  if (c.publishers === 'all' && !admin) throw new ValidationError("cohort.publishers 'all' (a group chat) needs an admin")
  if (c.closed && (!admin || c.publishers === 'all')) throw new ValidationError('cohort.closed needs an admin, and no publishers: all')
  if (c.history && (binding !== 'feed' || !admin)) throw new ValidationError("cohort.history needs binding 'feed' and an admin")
  if (c.pot && binding !== 'feed') throw new ValidationError("cohort.pot needs binding 'feed'")
  return r
}

/** Explicit authorship: an admin, and not a group chat; every publisher claims its stream with an AUTH. */
export function explicit(c: ResolvedCohort): boolean {
  return c.binding !== undefined && c.admin !== undefined && c.publishers !== 'all'
}

/** The spec and peer as query parameters: what names the cohort at the node. */
export function specQuery(c: ResolvedCohort, peer: string): URLSearchParams {
  const q = new URLSearchParams({ peer })
  if (c.binding === undefined) return q
  q.set('binding', c.binding)
  if (c.admin) q.set('admin', hex(c.admin))
  if (c.publishers) q.set('publishers', c.publishers)
  if (c.closed) q.set('closed', 'true')
  if (c.history) q.set('history', 'true')
  if (c.pot) q.set('pot', 'true')
  return q
}

/** The URL of /pubsub/<topic><suffix>?q on api, as ws(s) or http(s). */
export function endpoint(api: string, topic: Uint8Array, suffix: string, q: URLSearchParams, ws: boolean): string {
  let u: URL
  try {
    u = new URL(api)
  } catch {
    throw new ValidationError(`api: not a URL: ${api}`)
  }
  if (ws) {
    if (u.protocol === 'http:') u.protocol = 'ws:'
    else if (u.protocol === 'https:') u.protocol = 'wss:'
  }
  u.pathname = u.pathname.replace(/\/$/, '') + '/pubsub/' + hex(topic) + suffix
  u.search = q.toString()
  return u.toString()
}
