import { PrivateKey } from '@ethersphere/bee-js'
import { prepareClaim } from './claim.js'
import { BytesLike, concat, hex, toBytes, toUint64, uint64BE } from './bytes.js'
import { Emitter } from './emitter.js'
import { BpsError, ClaimError, CloseCode, CloseError, HttpError, StateError, TimeoutError, ValidationError } from './errors.js'
import {
  ClaimEvent,
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
  WaitingEvent,
} from './frames.js'
import { parseFrame } from './json.js'
import { postService } from './post.js'
import { ServiceMessage } from './service.js'
import { Cohort, endpoint, explicit, ResolvedCohort, resolveCohort, specQuery } from './spec.js'
import { feedId, HeldSigner, mineOwnerId, PO_MIN, proximity, publicKeyAddress, SignedSOC, signSOCWith, Signer, socAddress, toSigner } from './soc.js'
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
  /** A feed publisher's cursor (binding 'feed' with an admin): its first update's index, signed into its claim. Default 0. */
  index?: bigint | number | string
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
  /** The session answered a claim-request. */
  claim: (e: ClaimEvent) => void
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
 * node recovers what it missed), a feed publisher claims again at its next
 * index.
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

  /** The next feed index this publisher sends. */
  private nextIndex: bigint
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
    this.nextIndex = o.index === undefined ? 0n : toUint64(o.index, 'index')
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
    // asks for address and index as well. They, like every parameter a
    // header could carry, go in the query: a browser's WebSocket sends no
    // headers, and the node reads each from either.
    let fields = o.fields ? [...o.fields] : undefined
    if (fields && fields.some((f, i) => f === 'payload' && i !== fields!.length - 1)) {
      throw new ValidationError('fields: payload must come last')
    }
    if (c.binding === 'feed') {
      fields = fields ?? ['payload']
      for (const f of ['index', 'address'] as Field[]) if (!fields.includes(f)) fields.unshift(f)
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

  /** A feed publisher's next index. */
  get index(): bigint {
    return this.nextIndex
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
        if (c.binding === 'feed' && explicit(c)) q.set('index', this.nextIndex.toString())
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
    // A publisher stream shared with another session is claimed at that
    // session's cursor: never send below it.
    if (e?.index !== undefined && e.index > this.nextIndex) this.nextIndex = e.index
    // The GSOC session gets no ready frame: it is ready once open.
    this._ready = e ?? { role: this.key ? 'publisher' : 'subscriber', topic: hex(this.cohort.topic), binding: '', broker: '', fields: this.fields.join(',') }
    this.emit('ready', this._ready)
  }

  private onText(data: string): void {
    let f: Record<string, unknown>
    try {
      f = parseFrame(data)
      switch (f.type) {
        case 'ready':
          this.becomeReady(readyEvent(f))
          return
        case 'waiting': {
          this._state = 'waiting'
          this.attempt = 0
          this.emit('waiting', { addr: String(f.addr ?? '').replace(/^0x/, '').toLowerCase(), reason: String(f.reason ?? '') })
          return
        }
        case 'claim-request': {
          if (!this.key) throw new ClaimError('claim requested from a subscriber')
          const { preimage, event } = prepareClaim(this.addr!, f)
          const sock = this.socket
          const answer = (sig: Uint8Array) => {
            if (sig.length !== 65) throw new ClaimError(`signer: a signature is 65 bytes, got ${sig.length}`)
            if (sock !== this.socket) return // the connection it was asked on is gone
            sock?.sendText(JSON.stringify({ type: 'claim', signature: hex(sig) }))
            this.emit('claim', event)
          }
          const sig = this.key.sign(preimage)
          if (sig instanceof Uint8Array) answer(sig)
          else
            Promise.resolve(sig).then(
              (s) => answer(new Uint8Array(s)),
              (e) => this.fail(e instanceof BpsError ? e : new ClaimError(`the signer refused the claim: ${(e as Error).message}`)),
            )
          return
        }
        case 'service': {
          const e = serviceEvent(f)
          for (const p of e.publishers) this.candidates.add(p)
          if (!this.service || e.index >= this.service.index) this.service = e
          if (e.kind === 'END_OF_STREAM') this.ended = true
          this.emit('service', e)
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
    if (m.recoveredPubKey) return publicKeyAddress(m.recoveredPubKey).toHex()
    if (!m.address) return undefined
    const c = this.cohort
    const id =
      m.identifier ??
      (c.binding === 'feed' && m.index !== undefined ? feedId(c.topic, m.index) : c.binding === 'soc_id' ? c.topic : undefined)
    if (!id) return undefined
    const want = hex(m.address)
    for (const cand of this.candidates) if (hex(socAddress(id, cand)) === want) return cand
    return undefined
  }

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

  /** Ends the session for good with err (a claim refused, an unreadable frame). */
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
      (err instanceof HttpError ? err.retryable : err instanceof CloseError ? err.retryable : !(err instanceof ValidationError || err instanceof ClaimError))
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
   * Signs payload as this session's next publication and sends it, framed
   * for the binding (docs/api.md, inbound frames). binding 'feed': update
   * opts.index, default the session's next index. 'anchor' with an admin,
   * 'owner', 'mnemonic': under opts.id, default a random id. Elsewhere the
   * binding fixes the id. Returns the signed SOC.
   */
  send(payload: Uint8Array | string, opts: { index?: bigint | number | string; id?: BytesLike } = {}): SignedSOC & { index?: bigint } {
    const { id, prefix, index } = this.frameFor(payload, opts)
    if (this.publishing !== undefined) {
      throw new StateError('publish() calls are still signing: send after them, or use publish() throughout')
    }
    const soc = signSOCWith(this.key!, id, typeof payload === 'string' ? new TextEncoder().encode(payload) : payload)
    if (soc instanceof Promise) {
      soc.catch(() => undefined) // not sent: the caller is told to publish()
      throw new StateError("this session's signer answers asynchronously (a Web Worker, a wallet): use publish(), which waits for it")
    }
    this.socket!.sendBinary(concat(prefix, soc.signature, soc.span, soc.payload))
    if (index !== undefined) this.nextIndex = index + 1n
    return { ...soc, index }
  }

  /**
   * send with any signer, synchronous or not (a Web Worker, a wallet's
   * session key): resolves once the frame is sent. Calls are sent in the
   * order they were made; a feed update takes its index at the call.
   */
  publish(payload: Uint8Array | string, opts: { index?: bigint | number | string; id?: BytesLike } = {}): Promise<SignedSOC & { index?: bigint }> {
    const { id, prefix, index } = this.frameFor(payload, opts)
    if (index !== undefined) this.nextIndex = index + 1n
    const signed = Promise.resolve().then(() => signSOCWith(this.key!, id, typeof payload === 'string' ? new TextEncoder().encode(payload) : payload))
    const before = this.publishing ?? Promise.resolve()
    const sent = before.then(
      () => signed,
      () => signed,
    ).then((soc) => {
      if (this._state !== 'ready' || !this.socket) throw new StateError(`session is ${this._state}: the frame was signed but not sent`)
      this.socket.sendBinary(concat(prefix, soc.signature, soc.span, soc.payload))
      return { ...soc, index }
    })
    const mine = sent.then(
      () => undefined,
      () => undefined,
    )
    this.publishing = mine
    void mine.then(() => {
      if (this.publishing === mine) this.publishing = undefined
    })
    return sent
  }

  /** The frames publish() is signing or sending, in order; undefined when none. */
  private publishing?: Promise<void>

  /** The SOC id, the frame's prefix and the feed index of the next publication; refuses what cannot be sent. */
  private frameFor(payload: Uint8Array | string, opts: { index?: bigint | number | string; id?: BytesLike }): { id: Uint8Array; prefix: Uint8Array; index?: bigint } {
    if (!this.key) throw new StateError('a subscriber session does not publish: open it with a key')
    if (this._state !== 'ready') {
      throw new StateError(`session is ${this._state}: send once it is ready (await session.ready())${this._state === 'waiting' ? '; the node said waiting: the admin\'s roster must name this address' : ''}`)
    }
    const c = this.cohort
    let id: Uint8Array
    let prefix: Uint8Array = new Uint8Array(0)
    let index: bigint | undefined
    let fixed: Uint8Array | undefined // the id the binding fixes
    if (c.binding === 'feed') {
      index = opts.index === undefined ? this.nextIndex : toUint64(opts.index, 'index')
      id = feedId(c.topic, index)
      prefix = uint64BE(index)
    } else if (c.binding === 'soc_id') {
      id = fixed = c.topic
    } else if (c.binding === undefined || (c.binding === 'anchor' && !c.admin)) {
      id = fixed = this.id!
    } else if (c.binding === 'owner' && !c.admin) {
      // Implicit OWNER: each message's SOC address within PO_MIN bits of the topic.
      const owner = toBytes(this.addr!, 20, 'addr')
      id = prefix = opts.id === undefined ? mineOwnerId(c.topic, owner) : toBytes(opts.id, 32, 'id')
      if (proximity(socAddress(id, owner), c.topic) < PO_MIN) {
        throw new ValidationError(`id: under the implicit owner binding the SOC address must share ${PO_MIN} leading bits with the topic`)
      }
    } else {
      id = prefix = opts.id === undefined ? randomId() : toBytes(opts.id, 32, 'id')
    }
    if (fixed && opts.id !== undefined && hex(toBytes(opts.id, 32, 'id')) !== hex(fixed)) {
      throw new ValidationError(`id: binding ${c.binding ?? 'GSOC'} fixes the id to ${hex(fixed)}`)
    }
    const data = typeof payload === 'string' ? new TextEncoder().encode(payload) : payload
    if (data.length < 1 || data.length > 4096) throw new ValidationError(`payload of ${data.length} bytes: a chunk holds 1 to 4096`)
    return { id, prefix, index }
  }

  /**
   * Posts a service message signed with this session's key (the admin's)
   * through its node; the session must be the admin's, open. index defaults
   * to one past the latest service update the session knows (0 first).
   */
  postService(m: Omit<ServiceMessage, 'index'> & { index?: bigint | number | string }): Promise<bigint> {
    const run = async () => {
      if (!this.key) throw new StateError('only the admin\'s session posts service messages: open it with the admin\'s key')
      const index = m.index === undefined ? (this.service ? this.service.index + 1n : 0n) : toUint64(m.index, 'index')
      const got = await postService({ api: this.api, peer: this.peer, cohort: this.o.cohort, key: this.key, message: { ...m, index } })
      const e: ServiceEvent = { kind: m.kind, index: got, publishers: (m.publishers ?? []).map((p) => hex(toBytes(p, 20, 'publisher'))), gap: false }
      for (const p of e.publishers) this.candidates.add(p)
      if (!this.service || got >= this.service.index) this.service = e
      return got
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
    const set = new Set((this.service?.publishers ?? []).concat(publishers.map((p) => hex(toBytes(p, 20, 'publisher')))))
    return this.setRoster([...set])
  }

  /** Removes publishers from the latest roster the session knows. */
  revoke(...publishers: BytesLike[]): Promise<bigint> {
    const drop = new Set(publishers.map((p) => hex(toBytes(p, 20, 'publisher'))))
    return this.setRoster((this.service?.publishers ?? []).filter((p) => !drop.has(p)))
  }

  /** Ends the cohort (END_OF_STREAM): every session of it closes with 1000. */
  endStream(): Promise<bigint> {
    return this.postService({ kind: 'END_OF_STREAM' })
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

