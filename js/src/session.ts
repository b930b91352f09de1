import { PrivateKey } from '@ethersphere/bee-js'
import { BytesLike, concat, equal, hex, toBytes, toUint64, uint64BE } from './bytes.js'
import { defaultFeedCursors, FeedCursor, FeedCursors, HELD } from './cursor.js'
import { Emitter } from './emitter.js'
import { BpsError, CloseCode, CloseError, HttpError, SignError, StateError, TimeoutError, ValidationError } from './errors.js'
import {
  ChallengeEvent,
  challengeEvent,
  decodeMessage,
  equivocationEvent,
  EquivocationEvent,
  Field,
  Message,
  parseFields,
  rangeEvent,
  RangeEvent,
  readyEvent,
  ReadyEvent,
  serviceEvent,
  ServiceEvent,
  StaleEvent,
  staleFrame,
  WaitingEvent,
} from './frames.js'
import { parseFrame } from './json.js'
import { postService } from './post.js'
import { ServiceMessage } from './service.js'
import { channelId, inboundFrame, Kind, kindPrefix, sessionId, sessionTopic, signChunk, socData } from './sessionfeed.js'
import { Cohort, endpoint, explicit, ResolvedCohort, resolveCohort, specQuery } from './spec.js'
import { HeldSigner, keccak, mineOwnerId, PO_MIN, proximity, publicKeyAddress, SignedSOC, Signer, socAddress, toSigner } from './soc.js'
import { Connect, Socket } from './transport.js'
import { connect as defaultConnect, randomBytes, sendsHeaders as defaultSendsHeaders } from './platform.js'

/** Reconnecting with backoff: the delays grow from initialDelay by factor up to maxDelay, with jitter. */
export interface ReconnectOptions {
  /** Milliseconds before the first retry (default 500). */
  initialDelay?: number
  /** The longest wait between tries, milliseconds (default 30000). */
  maxDelay?: number
  /** Growth of the delay per failed try (default 2). */
  factor?: number
  /** Tries in a row before giving up (default: no limit). */
  maxAttempts?: number
}

export interface SessionOptions {
  /** The node's API, e.g. http://127.0.0.1:1633; a function is read again at each (re)connect. */
  api: string | (() => string)
  /** The broker: its overlay in hex (stable across its restarts; the node dials it), or an underlay multiaddr with /p2p/; a function is read again at each (re)connect. */
  peer: string | (() => string)
  cohort: Cohort
  /** Publish as this key's address; the key never leaves the client: it signs here. Or a signer (a wallet's session key, a Web Worker): see Signer. Absent: a subscriber. */
  key?: PrivateKey | BytesLike | Signer
  /** The SOC id a session signs under where the binding fixes it per session: binding 'anchor' without admin, and the GSOC session. */
  id?: BytesLike
  /**
   * A publisher's own feed cursor: the lowest index its key has not signed
   * on this topic (kept by the dApp across restarts; default 0). Every DATA
   * chunk of a publisher is an update of its feed (explicit authorship,
   * `publishers: 'all'`, implicit binding 'feed'), and the broker drops an
   * index below the cursor it holds as a retransmit: a dApp that restarts
   * gives the cursor it kept. The client only moves it forward (the
   * session's feed cursors).
   */
  index?: bigint | number | string
  /** The feed cursors this session's key shares with the program's other sessions (default: the process's). */
  feedCursors?: FeedCursors
  /** A subscriber's resume index (binding 'feed', node with storage): updates from here on that it missed are recovered. */
  resume?: bigint | number | string
  /** swarm-postage-batch-id: the node uploads every update this session publishes, stamped with this batch of the node's. */
  postageBatch?: BytesLike
  /** swarm-soc-fields: the fields of each received message, in order (payload last). Default: the node's ('payload'). */
  fields?: Field[]
  /** swarm-keep-alive, seconds. */
  keepAlive?: number
  /** Reconnect when the connection or the broker's stream is lost (default true). */
  reconnect?: boolean | ReconnectOptions
  /** Another WebSocket transport (tests, other runtimes). sendsHeaders is no longer read: every parameter goes in the query. */
  transport?: { connect: Connect; sendsHeaders?: boolean }
}

/** A disconnection: why, and whether and when the session tries again. */
export interface DisconnectEvent {
  error: BpsError
  /** Whether the session opens again. */
  retry: boolean
  /** Milliseconds until it does. */
  delay: number
  /** Tries in a row so far. */
  attempt: number
}

/** The session's end: it will not open again. error is undefined when the client closed it. */
export interface CloseEvent {
  error?: BpsError
}

export type SessionState = 'connecting' | 'waiting' | 'ready' | 'closed'

export interface SessionEvents {
  /** The WebSocket is open (the node joined the cohort). */
  open: () => void
  ready: (e: ReadyEvent) => void
  waiting: (e: WaitingEvent) => void
  /** The node handed a publishing session its stream's challenge (a new one after each rejoin of the broker). */
  challenge: (e: ChallengeEvent) => void
  /** The session signed and sent its stream's AUTH: the claim (explicit authorship). */
  auth: (e: { challenge: string; seq: number }) => void
  /** A frame signed under an earlier challenge was not sent; re-signed and sent again if still held. */
  stale: (e: StaleEvent) => void
  message: (m: Message) => void
  service: (e: ServiceEvent) => void
  recovered: (e: RangeEvent) => void
  gap: (e: RangeEvent) => void
  equivocation: (e: EquivocationEvent) => void
  /** The node's error frame: the whole reason of the close that follows. */
  nodeError: (reason: string) => void
  disconnect: (e: DisconnectEvent) => void
  close: (e: CloseEvent) => void
}

const randomId = (): Uint8Array => randomBytes(32)

/** A refused page session closes with this plus the HTTP status. */
const REFUSED_BASE = 4000

/**
 * One session on a cohort at a broker, through a node: a subscriber, or a
 * publisher signing locally with its key. It reconnects after a lost
 * connection, with backoff: a feed subscriber resumes at its cursor (the
 * node recovers what it missed), a publisher signs an AUTH under its new
 * stream's challenge and goes on at its next index.
 *
 * A publisher on the Rev 8 wire (SWIP-74 Rev 8, SWIP-60 rev 14; docs/api.md)
 * signs every chunk under the challenge of the node's stream to the broker,
 * which the node hands it in a `challenge` frame: the ids are the session
 * feed's, derived here from the challenge and the topic the session opened.
 * Under explicit authorship its first frame after each challenge is an AUTH
 * (the claim). It signs a DATA index only within [its feed cursor, + 1024),
 * or below it only the payload it signed there, to re-sign it under a newer
 * challenge when the node says a frame went `stale`.
 */
export class Session extends Emitter<SessionEvents> {
  readonly cohort: ResolvedCohort
  /** The address this session publishes as (hex), if it publishes. */
  readonly addr?: string
  private readonly o: SessionOptions
  private readonly key?: HeldSigner
  private readonly id?: Uint8Array
  private readonly transport: { connect: Connect; sendsHeaders?: boolean }
  private readonly reconnect?: Required<ReconnectOptions>
  private readonly fields: Field[]
  private readonly batch?: Uint8Array

  private socket?: Socket
  private _state: SessionState = 'connecting'
  private _ready?: ReadyEvent
  private attempt = 0
  private timer?: ReturnType<typeof setTimeout>
  private userClosed = false
  private ended = false
  private nodeReason?: string
  private finalError?: BpsError
  private lastError?: BpsError
  private decodeFields: Field[]

  /** How this session publishes: the GSOC client's frames, the binding's own id (implicit authorship), or the session feed (explicit authorship, publishers: 'all'). */
  private readonly mode: 'gsoc' | 'implicit' | 'session'
  /** This key's DATA feed on the topic: the session feed's, or an implicit feed's; shared with the program's other sessions of the key. */
  private readonly feed?: FeedCursor
  /** The challenge of the node's stream this connection publishes on, as the latest `challenge` frame gave it, and that frame's seq. */
  private _challenge?: Uint8Array
  private challengeHex?: string
  private _seq?: number
  /** The challenge the AUTH was sent under (explicit authorship); cleared when the session must claim again. */
  private authSentFor?: string
  /** Frames to send, in order: signed under the current challenge when their turn comes (at most 2 × HELD). */
  private readonly outbox: Outgoing[] = []
  private pumping = false
  /** The latest roster (hex addresses, the admin not listed) and its index, as seen or posted. */
  private roster = new Set<string>()
  private rosterIndex?: bigint
  /** Per publisher (hex address; '' unknown), the next index expected of its feed. */
  private readonly cursors = new Map<string, bigint>()
  private readonly candidates = new Set<string>()
  private readonly recovering: RangeEvent[] = []
  /** The latest service update the session saw or posted. */
  private service?: ServiceEvent
  private posting: Promise<unknown> = Promise.resolve()

  constructor(o: SessionOptions) {
    super()
    this.o = o
    this.cohort = resolveCohort(o.cohort)
    if (!o.api) throw new ValidationError('api: required')
    if (!o.peer) throw new ValidationError('peer: required (the broker: a multiaddr with /p2p/, or its overlay)')
    this.transport = o.transport ?? { connect: defaultConnect, sendsHeaders: defaultSendsHeaders }
    const c = this.cohort
    if (o.key !== undefined) {
      this.key = toSigner(o.key)
      this.addr = hex(this.key.address)
    }
    if (o.id !== undefined) this.id = toBytes(o.id, 32, 'id')
    this.mode = c.binding === undefined ? 'gsoc' : c.admin ? 'session' : 'implicit'
    if (this.key && (this.mode === 'session' || c.binding === 'feed')) {
      const start = o.index === undefined ? undefined : toUint64(o.index, 'index')
      this.feed = (o.feedCursors ?? defaultFeedCursors).get(this.key.address, c.topic, start)
    } else if (o.index !== undefined && this.key) {
      throw new ValidationError(`index: binding ${c.binding ?? 'GSOC'} without admin has no feed index`)
    }
    if (o.resume !== undefined) {
      if (this.key) throw new ValidationError('resume: a subscriber\'s; a publisher gives index, its cursor')
      if (c.binding !== 'feed') throw new ValidationError("resume: only binding 'feed'")
      this.cursors.set('', toUint64(o.resume, 'resume'))
    }
    if (o.postageBatch !== undefined) {
      if (!this.key) throw new ValidationError('postageBatch: only a publishing session uploads: give key')
      this.batch = toBytes(o.postageBatch, 32, 'postageBatch')
    }
    if (c.binding === undefined || (c.binding === 'anchor' && !c.admin)) {
      if (this.key && !this.id) throw new ValidationError('id: required to publish on the GSOC session or binding anchor without admin (the topic is keccak256(id ‖ addr))')
    }
    if (c.admin) this.candidates.add(hex(c.admin))

    const rc = o.reconnect ?? true
    if (rc) {
      const r = rc === true ? {} : rc
      this.reconnect = { initialDelay: r.initialDelay ?? 500, maxDelay: r.maxDelay ?? 30000, factor: r.factor ?? 2, maxAttempts: r.maxAttempts ?? Infinity }
    }

    // The fields: a feed session tracks each publisher's cursor, so it
    // asks for address and index as well, and what names the owner: under
    // explicit authorship the signed id (a session-feed id, which the
    // challenge salts: the address is matched with the admin and the
    // roster), elsewhere the recovered key (any owner). They, like every
    // parameter a header could carry, go in the query: a browser's
    // WebSocket sends no headers, and the node reads each from either.
    let fields = o.fields ? [...o.fields] : undefined
    if (fields && fields.some((f, i) => f === 'payload' && i !== fields!.length - 1)) {
      throw new ValidationError('fields: payload must come last')
    }
    if (c.binding === 'feed') {
      fields = fields ?? ['payload']
      const owner: Field = explicit(c) ? 'identifier' : 'recoveredPubKey'
      for (const f of ['index', owner, 'address'] as Field[]) if (!fields.includes(f)) fields.unshift(f)
    }
    this.askFields = fields !== undefined
    this.fields = fields ?? (c.binding === undefined ? ['signature', 'span', 'payload'] : ['payload'])
    this.decodeFields = this.fields
    this.open()
  }

  /** connecting, waiting (a publisher that may not publish yet, or any more), ready, or closed. */
  get state(): SessionState {
    return this._state
  }

  /** The node's latest ready frame. */
  get readyFrame(): ReadyEvent | undefined {
    return this._ready
  }

  /** The latest roster or end of stream this session saw. */
  get latestService(): ServiceEvent | undefined {
    return this.service
  }

  /** A publisher's next DATA index: its feed cursor, the lowest index its key has not signed on the topic (0 where it has no feed). */
  get index(): bigint {
    return this.feed?.next ?? 0n
  }

  /** The challenge (hex) of the node's stream this publishing session signs under now; undefined before the node's `challenge` frame. */
  get challenge(): string | undefined {
    return this.challengeHex
  }

  /** The seq of the latest `challenge` frame: which stream of this connection (1, 2, …). */
  get seq(): number | undefined {
    return this._seq
  }

  /** The index a feed subscriber resumes at after a reconnect: the lowest next index among the publishers it follows. */
  get cursor(): bigint | undefined {
    let min: bigint | undefined
    for (const v of this.cursors.values()) if (min === undefined || v < min) min = v
    return min
  }

  /** The node's API now: the option, read again at each connect if a function. */
  get api(): string {
    return typeof this.o.api === 'function' ? this.o.api() : this.o.api
  }

  /** The broker now: the option, read again at each connect if a function. */
  get peer(): string {
    return typeof this.o.peer === 'function' ? this.o.peer() : this.o.peer
  }

  /** Whether the session names its fields (swarm-soc-fields). */
  private readonly askFields: boolean

  private url(): string {
    const c = this.cohort
    const q = specQuery(c, this.peer)
    // The parameters bee's API takes as headers, as query parameters of the
    // same names (docs/api.md): a browser's WebSocket sends no headers.
    if (this.askFields) q.set('swarm-soc-fields', this.fields.join(','))
    if (this.batch) q.set('swarm-postage-batch-id', hex(this.batch))
    if (this.o.keepAlive !== undefined) q.set('swarm-keep-alive', String(this.o.keepAlive))
    if (this.key) {
      if (c.binding === undefined) {
        q.set('gsoc-eth-address', this.addr!)
        q.set('gsoc-topic', hex(this.id!))
      } else {
        q.set('addr', this.addr!)
        if (c.binding === 'anchor' && !c.admin) q.set('id', hex(this.id!))
        // The node does nothing with a publisher's index but echo it: the
        // client's own cursor, for the operator to read.
        if (c.binding === 'feed' && c.admin) q.set('index', this.index.toString())
      }
    } else if (this.cursor !== undefined && !this.noCursor) {
      q.set('index', this.cursor.toString())
    }
    return endpoint(this.api, c.topic, '', q, true)
  }

  private open(): void {
    this.timer = undefined
    this._state = 'connecting'
    this.nodeReason = undefined
    this.nodeRefusal = undefined
    // A new connection, a new stream: its challenge comes in its own frame.
    this._challenge = this.challengeHex = this._seq = this.authSentFor = undefined
    const headers = {}
    let sock: Socket | undefined
    const current = () => sock !== undefined && sock === this.socket
    sock = this.transport.connect(this.url(), headers, {
      open: () => {
        if (!current()) return
        this.emit('open')
        if (this.cohort.binding === undefined) this.becomeReady(undefined) // GSOC: no text frames
      },
      text: (d) => current() && this.onText(d),
      binary: (d) => current() && this.onBinary(d),
      closed: (code, reason) => current() && this.onEnd(this.closeError(code, reason)),
      refused: (err) => current() && this.onEnd(err),
    })
    this.socket = sock
  }

  /**
   * The error a close makes: a page's session the node refused before it
   * could be a session closes with 4000 + the HTTP status (docs/api.md), and
   * is the HttpError a Node program gets; any other close a CloseError.
   */
  private closeError(code: number, reason: string): BpsError {
    if (code >= REFUSED_BASE + 400 && code < REFUSED_BASE + 1000) {
      const f = this.nodeRefusal
      const body = f ? JSON.stringify({ message: f.message, reasons: f.reasons }) : reason
      const ra = f && typeof f.retryAfter === 'number' ? String(f.retryAfter) : undefined
      return HttpError.fromBody('open session', code - REFUSED_BASE, body, ra)
    }
    return new CloseError(code, reason, this.nodeReason)
  }

  private becomeReady(e: ReadyEvent | undefined): void {
    this._state = 'ready'
    this.attempt = 0
    if (e) this.decodeFields = parseFields(e.fields)
    // The ready frame's index is the client's own hint echoed: never a
    // cursor the client takes from the node.
    // The GSOC session gets no ready frame: it is ready once open.
    this._ready = e ?? { role: this.key ? 'publisher' : 'subscriber', topic: hex(this.cohort.topic), binding: '', broker: '', fields: this.fields.join(',') }
    this.emit('ready', this._ready)
    this.pump()
  }

  private onText(data: string): void {
    let f: Record<string, unknown>
    try {
      f = parseFrame(data)
      switch (f.type) {
        case 'ready': {
          const e = readyEvent(f)
          if (e.seq !== undefined && this._seq !== undefined && e.seq < this._seq) return // an earlier stream's
          if (e.role === 'publisher' && this.mode === 'session' && this.key && !this._challenge) {
            throw new BpsError('the node said ready before it handed the stream\'s challenge: nothing can be signed')
          }
          this.becomeReady(e)
          return
        }
        case 'challenge':
          this.onChallenge(challengeEvent(f))
          return
        case 'waiting': {
          this._state = 'waiting'
          this.attempt = 0
          this.emit('waiting', { addr: String(f.addr ?? '').replace(/^0x/, '').toLowerCase(), reason: String(f.reason ?? '') })
          return
        }
        case 'stale':
          this.onStale(staleFrame(f))
          return
        case 'service': {
          const e = serviceEvent(f)
          this.takeService(e)
          this.emit('service', e)
          // A roster naming this address is the cue to claim: the session
          // sends its AUTH on the stream it holds (a spectator, a silent
          // seat, a revoked publisher granted again).
          if (e.kind === 'ROSTER' && this.claimsNow()) this.sendAuth()
          return
        }
        case 'recovered': {
          const e = rangeEvent(f, 'recovered')
          this.candidates.add(e.addr)
          if (this.recovering.length < 64) this.recovering.push(e)
          this.emit('recovered', e)
          return
        }
        case 'gap': {
          const e = rangeEvent(f, 'gap')
          this.candidates.add(e.addr)
          const next = this.cursors.get(e.addr)
          if (next === undefined || next <= e.to) this.cursors.set(e.addr, e.to + 1n)
          this.emit('gap', e)
          return
        }
        case 'equivocation':
          this.emit('equivocation', equivocationEvent(f))
          return
        case 'error':
          this.nodeReason = String(f.reason ?? '')
          this.nodeRefusal = typeof f.status === 'number' ? f : undefined
          this.emit('nodeError', this.nodeReason)
          return
      }
      // A frame type this client does not know: a newer node's; ignored.
    } catch (e) {
      const err = e instanceof BpsError ? e : new BpsError(`unreadable text frame from the node: ${(e as Error).message}: ${data.slice(0, 200)}`)
      this.fail(err)
    }
  }

  private owner(m: Message): string | undefined {
    if (m.recoveredPubKey) {
      try {
        return publicKeyAddress(m.recoveredPubKey).toHex()
      } catch {
        return undefined // not a point: the node checked it, so never
      }
    }
    if (!m.address) return undefined
    const c = this.cohort
    // The signed id names the owner with the address; without it, only the
    // ids a binding fixes (an implicit feed's keccak256(topic ‖ index), the
    // soc_id topic): a session-feed id depends on a challenge a subscriber
    // never learns.
    const id =
      m.identifier ??
      (c.binding === 'feed' && !c.admin && m.index !== undefined ? channelId(c.topic, m.index) : c.binding === 'soc_id' ? c.topic : undefined)
    if (!id) return undefined
    for (const cand of this.candidates) {
      const b = this.candidateBytes(cand)
      if (b.length === 20 && equal(keccak(id, b), m.address)) return cand
    }
    return undefined
  }

  /** A candidate publisher's address as bytes (hex is how the session keeps them), decoded once; empty if it is not an address. */
  private candidateBytes(cand: string): Uint8Array {
    let b = this.candidateCache.get(cand)
    if (!b) {
      if (this.candidateCache.size >= 1024) this.candidateCache.clear()
      try {
        b = toBytes(cand, 20, 'candidate')
      } catch {
        b = new Uint8Array(0) // a node's frame named no address: matches nothing
      }
      this.candidateCache.set(cand, b)
    }
    return b
  }
  private readonly candidateCache = new Map<string, Uint8Array>()

  private onBinary(data: Uint8Array): void {
    const m = decodeMessage(data, this.decodeFields)
    m.owner = this.owner(m)
    if (m.index !== undefined) {
      const key = m.owner ?? ''
      const next = this.cursors.get(key)
      if (m.owner !== undefined && next !== undefined && m.index < next) return // a copy of an update handed before
      for (let i = 0; i < this.recovering.length; i++) {
        const r = this.recovering[i]
        if ((m.owner === undefined || m.owner === r.addr) && m.index >= r.from && m.index <= r.to) {
          m.recovered = true
          if (m.index === r.to) this.recovering.splice(i, 1)
          break
        }
      }
      if (next === undefined || m.index >= next) this.cursors.set(key, m.index + 1n)
      // The resume index given stands for the publishers not seen yet,
      // until one is: then each known publisher has its own cursor.
      if (m.owner === undefined) this.unknownSeen = true
      else if (!this.unknownSeen) this.cursors.delete('')
    }
    this.emit('message', m)
  }
  private unknownSeen = false
  /** The error frame of a refused page session: the HTTP answer a program would have read. */
  private nodeRefusal?: Record<string, unknown>
  /** The node refused the cursor (a node without storage): reconnect without it. */
  private noCursor = false

  /** Ends the session for good with err (a challenge refused, an unreadable frame). */
  private fail(err: BpsError): void {
    this.finalError = err
    this.userClosed = true
    this.socket?.close(CloseCode.Normal, err.message.slice(0, 120))
    this.finish(err)
  }

  private onEnd(err: BpsError): void {
    this.socket = undefined
    this.lastError = err
    if (this.userClosed) {
      this.finish(this.finalError)
      return
    }
    if (
      err instanceof HttpError &&
      err.status === 400 &&
      !this.key &&
      !this.noCursor &&
      this.cursor !== undefined &&
      err.reasons.some((r) => r.field === 'index') &&
      this.reconnect &&
      this.attempt > 0
    ) {
      // A reconnect at the cursor on a node without storage, which cannot
      // recover: reconnect live only, and say so.
      this.noCursor = true
      this.emit('disconnect', { error: err, retry: true, delay: 0, attempt: this.attempt })
      this.timer = setTimeout(() => this.open(), 0)
      return
    }
    const retryable =
      !this.ended &&
      !(err instanceof CloseError && err.endOfStream) &&
      (err instanceof HttpError ? err.retryable : err instanceof CloseError ? err.retryable : !(err instanceof ValidationError || err instanceof SignError))
    if (!this.reconnect || !retryable || this.attempt >= this.reconnect.maxAttempts) {
      this.emit('disconnect', { error: err, retry: false, delay: 0, attempt: this.attempt })
      this.finish(err)
      return
    }
    const r = this.reconnect
    const base = Math.min(r.maxDelay, r.initialDelay * r.factor ** this.attempt)
    let delay = Math.round(base / 2 + (Math.random() * base) / 2)
    if (err instanceof HttpError && err.retryAfter !== undefined) delay = Math.max(delay, err.retryAfter * 1000)
    this.attempt++
    this._state = 'connecting'
    this.emit('disconnect', { error: err, retry: true, delay, attempt: this.attempt })
    this.timer = setTimeout(() => this.open(), delay)
  }

  private finish(err?: BpsError): void {
    if (this._state === 'closed') return
    this._state = 'closed'
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.finalError = err
    for (const o of this.outbox.splice(0)) o.reject?.(err ?? new StateError('session closed: the frame was not sent'))
    this.emit('close', { error: err })
  }

  /**
   * Resolves with the ready frame once the session is ready (at once if it
   * is); rejects when the session closes first, or after timeoutMs.
   */
  ready(timeoutMs?: number): Promise<ReadyEvent> {
    if (this._state === 'ready' && this._ready) return Promise.resolve(this._ready)
    return this.waitFor('ready', undefined, timeoutMs)
  }

  /**
   * The next event of type that match accepts; rejects when the session
   * closes first (with the close's error) or after timeoutMs.
   */
  waitFor<K extends keyof SessionEvents>(
    type: K,
    match?: (...args: Parameters<SessionEvents[K]>) => boolean,
    timeoutMs?: number,
  ): Promise<Parameters<SessionEvents[K]>[0]> {
    return new Promise((resolve, reject) => {
      if (this._state === 'closed') {
        if (type === 'close') resolve({ error: this.finalError } as Parameters<SessionEvents[K]>[0])
        else reject(this.finalError ?? new StateError('session closed'))
        return
      }
      let timer: ReturnType<typeof setTimeout> | undefined
      const done = () => {
        offEv()
        offClose()
        if (timer) clearTimeout(timer)
      }
      const offEv = this.on(type, ((...args: Parameters<SessionEvents[K]>) => {
        if (match && !match(...args)) return
        done()
        resolve(args[0])
      }) as SessionEvents[K])
      const offClose =
        type === 'close'
          ? () => {}
          : this.on('close', (e) => {
              done()
              reject(e.error ?? new StateError(`session closed while waiting for ${String(type)}`))
            })
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          done()
          const last = this.lastError ? ` (the last disconnection: ${this.lastError.message})` : ''
          reject(new TimeoutError(`no ${String(type)} within ${timeoutMs} ms${last}`))
        }, timeoutMs)
      }
    })
  }

  /**
   * Signs payload as this session's next publication and sends it at once
   * (docs/api.md, inbound frames): under explicit authorship and
   * `publishers: 'all'` a DATA chunk of the session feed at opts.index
   * (default the next index of its feed cursor); under implicit authorship
   * the binding's own SOC — binding 'feed' at opts.index, 'owner' and
   * 'mnemonic' under opts.id (default a mined or random id), elsewhere the
   * id the binding fixes. Needs a signer that answers at once (a key);
   * refuses an index outside [cursor, cursor + 1024) or a second content at
   * an index (SignError). Returns the signed SOC.
   */
  send(payload: Uint8Array | string, opts: { index?: bigint | number | string; id?: BytesLike } = {}): SignedSOC & { index?: bigint } {
    this.checkReady()
    if (this.outbox.length > 0) {
      throw new StateError('publish() calls are still signing or waiting to be sent: send after them, or use publish() throughout')
    }
    const o = this.prepare(payload, opts)
    let built: Built | Promise<Built>
    try {
      built = this.build(o)
    } catch (e) {
      this.release(o)
      throw e
    }
    if (built instanceof Promise) {
      built.catch(() => undefined) // not sent: the caller is told to publish()
      this.release(o)
      throw new StateError("this session's signer answers asynchronously (a Web Worker, a wallet): use publish(), which waits for it")
    }
    this.socket!.sendBinary(built.frame)
    return { ...built.soc, index: this.indexOf(o) }
  }

  /** Gives back the index o took on the feed cursor, its frame not sent. */
  private release(o: Outgoing): void {
    if (o.before !== undefined) this.feed?.release(o.index, o.before)
  }

  /** The index a publication reports: its feed index where it has one. */
  private indexOf(o: Outgoing): bigint | undefined {
    return this.mode === 'session' || this.cohort.binding === 'feed' ? o.index : undefined
  }

  /**
   * send with any signer, synchronous or not (a Web Worker, a wallet's
   * session key): resolves once the frame is sent. Frames are sent in the
   * order of the calls; each takes its index at the call, and is signed (or
   * signed again) under the challenge of the stream it goes out on: a
   * publication made before the node rejoined the broker is sent after the
   * new stream's AUTH, re-signed. At most 1,024 wait at a time.
   */
  publish(payload: Uint8Array | string, opts: { index?: bigint | number | string; id?: BytesLike } = {}): Promise<SignedSOC & { index?: bigint }> {
    try {
      this.checkReady()
      if (this.outbox.length >= HELD) throw new StateError(`${HELD} frames are waiting to be sent: wait for some`)
      const o = this.prepare(payload, opts)
      return new Promise((resolve, reject) => {
        o.resolve = resolve
        o.reject = reject
        this.outbox.push(o)
        if (this.canSign()) this.startBuild(o)
        this.pump()
      })
    } catch (e) {
      return Promise.reject(e)
    }
  }

  private checkReady(): void {
    if (!this.key) throw new StateError('a subscriber session does not publish: open it with a key')
    if (this._state !== 'ready') {
      throw new StateError(`session is ${this._state}: send once it is ready (await session.ready())${this._state === 'waiting' ? "; the node said waiting: the admin's roster must name this address" : ''}`)
    }
  }

  /** The next publication's kind, index, payload and (implicit authorship) id; takes the index on the feed cursor. Refuses what cannot be signed. */
  private prepare(payload: Uint8Array | string, opts: { index?: bigint | number | string; id?: BytesLike }): Outgoing {
    const c = this.cohort
    const data = typeof payload === 'string' ? new TextEncoder().encode(payload) : payload
    if (data.length < 1 || data.length > 4096) throw new ValidationError(`payload of ${data.length} bytes: a chunk holds 1 to 4096`)
    if (this.mode === 'session' || c.binding === 'feed') {
      if (opts.id !== undefined) throw new ValidationError(`id: the id is the ${this.mode === 'session' ? 'session feed' : 'feed'}'s, derived from the index`)
      const index = opts.index === undefined ? this.feed!.next : toUint64(opts.index, 'index')
      const before = this.feed!.take(index, data)
      return { kind: Kind.DATA, index, payload: data, id: this.mode === 'session' ? undefined : channelId(c.topic, index), before }
    }
    if (opts.index !== undefined) throw new ValidationError(`index: binding ${c.binding ?? 'GSOC'} without admin has no feed index`)
    let id: Uint8Array
    let fixed: Uint8Array | undefined // the id the binding fixes
    if (c.binding === 'soc_id') {
      id = fixed = c.topic
    } else if (this.mode === 'gsoc' || c.binding === 'anchor') {
      id = fixed = this.id!
    } else if (c.binding === 'owner') {
      // Implicit OWNER: each message's SOC address within PO_MIN bits of the topic.
      const owner = this.key!.address
      id = opts.id === undefined ? mineOwnerId(c.topic, owner) : toBytes(opts.id, 32, 'id')
      if (proximity(socAddress(id, owner), c.topic) < PO_MIN) {
        throw new ValidationError(`id: under the implicit owner binding the SOC address must share ${PO_MIN} leading bits with the topic`)
      }
    } else {
      id = opts.id === undefined ? randomId() : toBytes(opts.id, 32, 'id')
    }
    if (fixed && opts.id !== undefined && hex(toBytes(opts.id, 32, 'id')) !== hex(fixed)) {
      throw new ValidationError(`id: binding ${c.binding ?? 'GSOC'} fixes the id to ${hex(fixed)}`)
    }
    return { kind: Kind.DATA, index: 0n, payload: data, id }
  }

  /** The session feeds' topics under the current challenge, by kind (kindId's first hash, made once a stream). */
  private feedTopics?: { challenge: string; byKind: Map<number, Uint8Array> }

  /** The topic of kind's session feed under the current challenge: sessionTopic, once per stream and kind. */
  private kindTopic(kind: number): Uint8Array {
    const ch = this.challengeHex!
    if (this.feedTopics?.challenge !== ch) this.feedTopics = { challenge: ch, byKind: new Map() }
    let t = this.feedTopics.byKind.get(kind)
    if (!t) {
      t = sessionTopic(kindPrefix(kind), this.cohort.topic, this._challenge!)
      this.feedTopics.byKind.set(kind, t)
    }
    return t
  }

  /** Whether a frame can be signed now: a session-feed frame needs the stream's challenge. */
  private canSign(): boolean {
    return this.mode !== 'session' || this._challenge !== undefined
  }

  /**
   * Signs o as the frame it goes out as: its chunk under its id (the
   * session feed's under the current challenge), and a persistent
   * session's storage update of a DATA chunk (the same payload under the
   * channel's id, SWIP-65: one more signature). At once with a key, a
   * promise with a signer that answers later.
   */
  private build(o: Outgoing): Built | Promise<Built> {
    const c = this.cohort
    const key = this.key!
    const challenge = this.challengeHex
    if (this.mode === 'gsoc') {
      return then(signChunk(key, o.id!, o.payload), (soc) => ({ soc, frame: concat(soc.signature, soc.span, soc.payload) }))
    }
    if (this.mode === 'implicit') {
      return then(signChunk(key, o.id!, o.payload), (soc) => ({ soc, frame: inboundFrame(Kind.DATA, o.index, soc) }))
    }
    if (!this._challenge) throw new StateError('no challenge from the node yet: nothing can be signed')
    const soc = signChunk(key, sessionId(this.kindTopic(o.kind), o.index), o.payload)
    const stored = this.batch && o.kind === Kind.DATA ? signChunk(key, channelId(c.topic, o.index), o.payload) : undefined
    const make = (s: SignedSOC, st?: SignedSOC): Built => ({ soc: s, frame: inboundFrame(o.kind, o.index, s, st?.signature), challenge })
    if (soc instanceof Promise || stored instanceof Promise) return Promise.all([soc, stored]).then(([s, st]) => make(s, st))
    return make(soc, stored)
  }

  /** Starts signing o under the current challenge; the pump sends it when its turn comes. */
  private startBuild(o: Outgoing): void {
    const b: Building = { challenge: this.challengeHex }
    o.built = b
    try {
      const v = this.build(o)
      if (v instanceof Promise) {
        b.pending = v.then(
          (r) => {
            b.value = r
            b.pending = undefined
            this.pump()
          },
          (e) => {
            b.error = e instanceof BpsError ? e : new SignError(`the signer refused: ${(e as Error)?.message ?? e}`)
            b.pending = undefined
            this.pump()
          },
        )
      } else b.value = v
    } catch (e) {
      b.error = e instanceof BpsError ? e : new SignError(`signing failed: ${(e as Error).message}`)
    }
  }

  /**
   * Sends what the outbox holds, in order, while the session is ready: each
   * frame signed under the challenge of the stream it goes out on (signed
   * again if it was signed under an earlier one).
   */
  private pump(): void {
    if (this.pumping) return
    this.pumping = true
    try {
      while (this.outbox.length > 0 && this._state === 'ready' && this.socket && this.canSign()) {
        const o = this.outbox[0]
        if (!o.built || o.built.challenge !== this.challengeHex) this.startBuild(o)
        const b = o.built!
        if (b.pending) return
        this.outbox.shift()
        if (b.error) {
          o.reject?.(b.error)
          continue
        }
        this.socket.sendBinary(b.value!.frame)
        o.resolve?.({ ...b.value!.soc, index: this.indexOf(o) })
      }
    } finally {
      this.pumping = false
    }
  }

  /** A `challenge` frame: the stream's challenge, signed under from now on; under explicit authorship the AUTH first, if this address may claim now. */
  private onChallenge(e: ChallengeEvent): void {
    if (!this.key) throw new BpsError('a challenge frame on a subscriber session')
    if (e.addr !== '' && e.addr !== this.addr) throw new SignError(`the node handed a challenge for ${e.addr}, not for this session's address ${this.addr}: not signed`)
    if (e.topic !== '' && e.topic !== hex(this.cohort.topic)) throw new SignError(`the node handed a challenge for topic ${e.topic}, not this session's ${hex(this.cohort.topic)}: not signed`)
    if (this._seq !== undefined && e.seq <= this._seq) return // an earlier stream's, late
    this._challenge = toBytes(e.challenge, 32, 'challenge')
    this.challengeHex = e.challenge
    this._seq = e.seq
    this.authSentFor = undefined
    // A new stream: nothing is sent until the node says ready on it.
    if (this._state === 'ready') this._state = 'connecting'
    for (const o of this.outbox) this.startBuild(o) // signed again under it, in parallel
    this.emit('challenge', e)
    if (this.claimsNow()) this.sendAuth()
  }

  /**
   * Whether the session sends its AUTH now (explicit authorship): it holds
   * a challenge it has not claimed with (or a roster revoked it since), and
   * its address is the admin's or on the roster it knows.
   */
  private claimsNow(): boolean {
    if (!this.key || !explicit(this.cohort) || !this._challenge) return false
    if (this.authSentFor === this.challengeHex) return false
    return this.addr === hex(this.cohort.admin!) || this.roster.has(this.addr!)
  }

  /** Signs the AUTH (kind 2, index 0, the empty chunk) under the current challenge and sends it: the claim. */
  private sendAuth(): void {
    const sock = this.socket
    const ch = this.challengeHex!
    const seq = this._seq!
    this.authSentFor = ch
    const o: Outgoing = { kind: Kind.AUTH, index: 0n, payload: new Uint8Array(0) }
    const sent = (b: Built) => {
      if (sock !== this.socket || ch !== this.challengeHex) return // a newer stream claims with its own
      sock?.sendBinary(b.frame)
      this.emit('auth', { challenge: ch, seq })
    }
    let v: Built | Promise<Built>
    try {
      v = this.build(o)
    } catch (e) {
      this.fail(e instanceof BpsError ? e : new SignError(`the AUTH was not signed: ${(e as Error).message}`))
      return
    }
    if (v instanceof Promise) v.then(sent, (e) => this.fail(e instanceof BpsError ? e : new SignError(`the signer refused the AUTH: ${(e as Error)?.message ?? e}`)))
    else sent(v)
  }

  /**
   * A `stale` frame: a frame signed under an earlier challenge was not
   * sent. A DATA update whose payload the feed cursor still holds is
   * re-signed at the same index under the latest challenge and sent before
   * the frames queued after it (the broker would take a lower index after
   * a higher one as a retransmit); else it is lost, and the event says so.
   */
  private onStale(f: { kind: string; index: bigint; seq: number }): void {
    let resent = false
    if (this.key && this.mode === 'session' && f.kind === 'DATA' && this.feed) {
      const payload = this.feed.payload(f.index)
      const queued = this.outbox.some((o) => o.kind === Kind.DATA && o.index === f.index)
      if (payload && !queued) {
        const o: Outgoing = { kind: Kind.DATA, index: f.index, payload }
        let at = this.outbox.findIndex((q) => q.kind === Kind.DATA && q.index > f.index)
        if (at < 0) at = this.outbox.length
        this.outbox.splice(at, 0, o)
        if (this.canSign()) this.startBuild(o)
        resent = true
      } else resent = queued
    }
    this.emit('stale', { kind: f.kind, index: f.index, seq: f.seq, resent })
    this.pump()
  }

  /** Takes a service event as the latest of its kind: the roster and its index, the end. */
  private takeService(e: ServiceEvent): void {
    for (const p of e.publishers) this.candidates.add(p)
    if (e.kind === 'EOS') {
      this.ended = true
      this.service = e
    } else if (this.rosterIndex === undefined || e.index >= this.rosterIndex) {
      if (!this.ended) this.service = e
      this.rosterIndex = e.index
      this.roster = new Set(e.publishers)
      // Revoked: a later roster naming the address is claimed again.
      if (this.addr && !this.roster.has(this.addr) && this.addr !== hex(this.cohort.admin ?? new Uint8Array(0))) this.authSentFor = undefined
    }
  }

  /**
   * Signs a ROSTER or EOS under this session's stream challenge — the
   * session must be the admin's publishing session — and posts it through
   * its node (POST /pubsub/{topic}/service), which sends it on this
   * session's stream. A ROSTER's index defaults to one past the latest
   * roster the session knows (0 first); EOS is at 0. If the node answers
   * 409 "no admin stream with this challenge" (the stream was replaced
   * meanwhile), it is signed again under the next challenge and posted once
   * more. Resolves with the index.
   */
  postService(m: Omit<ServiceMessage, 'index'> & { index?: bigint | number | string }): Promise<bigint> {
    const run = async () => {
      if (!this.key) throw new StateError("only the admin's session posts service messages: open it with the admin's key")
      const c = this.cohort
      if (!c.admin || this.addr !== hex(c.admin)) throw new StateError("only the admin's publishing session signs ROSTER and EOS")
      const index = m.index !== undefined ? toUint64(m.index, 'index') : m.kind === 'EOS' ? 0n : this.rosterIndex === undefined ? 0n : this.rosterIndex + 1n
      const message: ServiceMessage = { ...m, index }
      if (!this._challenge) await this.ready(30_000)
      for (let attempt = 0; ; attempt++) {
        const challenge = this.challengeHex!
        try {
          await postService({ api: this.api, peer: this.peer, cohort: this.o.cohort, key: this.key, challenge, message })
          break
        } catch (e) {
          // Only the stream replaced is worth another signature; a stale
          // index (a roster the node holds a later one of) is the caller's.
          if (!(e instanceof HttpError && e.status === 409 && /no admin stream/.test(e.nodeMessage)) || attempt > 0) throw e
          if (this.challengeHex === challenge) await this.waitFor('challenge', undefined, 30_000)
        }
      }
      const e: ServiceEvent = { kind: m.kind, index, publishers: (m.publishers ?? []).map((p) => hex(toBytes(p, 20, 'publisher'))), gap: false }
      this.takeService(e)
      return index
    }
    const p = this.posting.then(run, run)
    this.posting = p.catch(() => undefined)
    return p
  }

  /** Posts the roster: exactly these publishers (the admin is always one). */
  setRoster(publishers: BytesLike[]): Promise<bigint> {
    return this.postService({ kind: 'ROSTER', publishers })
  }

  /** Adds publishers to the latest roster the session knows. */
  grant(...publishers: BytesLike[]): Promise<bigint> {
    const set = new Set([...this.roster].concat(publishers.map((p) => hex(toBytes(p, 20, 'publisher')))))
    return this.setRoster([...set])
  }

  /** Removes publishers from the latest roster the session knows. */
  revoke(...publishers: BytesLike[]): Promise<bigint> {
    const drop = new Set(publishers.map((p) => hex(toBytes(p, 20, 'publisher'))))
    return this.setRoster([...this.roster].filter((p) => !drop.has(p)))
  }

  /** Ends the cohort (EOS): every session of it closes with 1000; a new stream takes another topic. */
  endStream(): Promise<bigint> {
    return this.postService({ kind: 'EOS' })
  }

  /** Closes the session for good; resolves once it is closed. */
  close(): Promise<void> {
    if (this._state === 'closed') return Promise.resolve()
    const closed = this.waitFor('close').then(() => undefined)
    this.userClosed = true
    if (this.timer || !this.socket) this.finish(undefined)
    else this.socket.close(CloseCode.Normal, 'bye')
    return closed
  }
}


/** A frame to send: its kind, index and payload, and (implicit authorship) its id; signed when its turn comes. */
interface Outgoing {
  kind: number
  index: bigint
  payload: Uint8Array
  id?: Uint8Array
  /** The feed cursor before this frame took its index (release). */
  before?: bigint
  built?: Building
  resolve?: (v: SignedSOC & { index?: bigint }) => void
  reject?: (e: BpsError) => void
}

/** A frame as signed, and the challenge it was signed under. */
interface Built {
  soc: SignedSOC
  frame: Uint8Array
  challenge?: string
}

/** A frame being signed under challenge: the frame, or the signer's answer pending, or its error. */
interface Building {
  challenge?: string
  value?: Built
  pending?: Promise<void>
  error?: BpsError
}

/** f of v, at once if v is not a promise. */
function then<T, U>(v: T | Promise<T>, f: (t: T) => U): U | Promise<U> {
  return v instanceof Promise ? v.then(f) : f(v)
}
