// Typed errors: every refusal of the node reaches the caller with the node's
// own words (the HTTP reasons, the error frame, the WebSocket close code and
// reason) and, where one helps, a hint saying what to do.

/** A reason the node gives for a parameter it refused (bee's JSON errors). */
export interface Reason {
  field: string
  error: string
}

/** WebSocket close codes the node uses (docs/api.md, "Errors and close codes"). */
export const CloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  Unsupported: 1003,
  /** No close frame: the connection dropped. */
  Abnormal: 1006,
  InvalidFrame: 1007,
  Policy: 1008,
  TooBig: 1009,
  InternalError: 1011,
  TryAgainLater: 1013,
  /** A page's session refused before it was one: 4000 + the HTTP status (4400, 4503, …); the session reports it as an HttpError. */
  RefusedBase: 4000,
} as const

/** The root of every error this client throws or reports. */
export class BpsError extends Error {
  /** What to do about it, where the client knows. */
  readonly hint?: string
  constructor(message: string, hint?: string) {
    super(hint ? `${message} (${hint})` : message)
    this.name = new.target.name
    this.hint = hint
  }
}

/** An argument this client refuses before anything reaches the node. */
export class ValidationError extends BpsError {}

/**
 * The node refused a request before any WebSocket (a session not opened) or a
 * service SOC (POST /pubsub/{topic}/service): its status and bee's JSON
 * error body. In a browser, which cannot read a refused upgrade, the node
 * upgrades and closes with 4000 + the status after an error frame with the
 * same answer: the session reports the same HttpError.
 */
export class HttpError extends BpsError {
  readonly status: number
  /** The node's message. */
  readonly nodeMessage: string
  readonly reasons: Reason[]
  /** Seconds the node asks to wait (Retry-After), if it said. */
  readonly retryAfter?: number
  /** "open session" or "post service". */
  readonly op: string

  constructor(op: string, status: number, nodeMessage: string, reasons: Reason[], retryAfter?: number) {
    const why = reasons.length > 0 ? `${nodeMessage}: ${reasons.map((r) => `${r.field}: ${r.error}`).join('; ')}` : nodeMessage
    super(`${op}: ${status} ${why}`, httpHint(op, status, reasons))
    this.op = op
    this.status = status
    this.nodeMessage = nodeMessage
    this.reasons = reasons
    this.retryAfter = retryAfter
  }

  /** Whether trying again later may succeed: the node or the broker is busy or unreachable. */
  get retryable(): boolean {
    // Not 429: the client's own share is used up, until it closes sessions.
    return this.status === 502 || this.status === 503 || this.status === 504
  }

  /** Reads the node's answer: bee's JSON error format, or plain text. */
  static fromBody(op: string, status: number, body: string, retryAfter?: string | null): HttpError {
    let message = body.trim()
    let reasons: Reason[] = []
    try {
      const j = JSON.parse(body)
      if (j && typeof j === 'object') {
        if (typeof j.message === 'string') message = j.message
        if (Array.isArray(j.reasons)) {
          reasons = j.reasons
            .filter((r: unknown) => r && typeof r === 'object')
            .map((r: { field?: unknown; error?: unknown }) => ({ field: String(r.field ?? ''), error: String(r.error ?? '') }))
        }
      }
    } catch {
      // not JSON: the body as it is
    }
    const ra = retryAfter != null && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter) : undefined
    return new HttpError(op, status, message || `status ${status}`, reasons, ra)
  }
}

function httpHint(op: string, status: number, reasons: Reason[]): string | undefined {
  const batch = reasons.some((r) => r.field === 'swarm-postage-batch-id')
  switch (status) {
    case 403:
      return op === 'post service'
        ? "sign with the admin's key: the cohort's admin signs its service feed"
        : "the node does not allow this page's origin: add it to the node's cors-allowed-origins"
    case 402:
      return 'the postage batch is exhausted: buy a new one, or dilute this one'
    case 404:
      return batch ? 'the batch is not this node\'s: give one GET /stamps lists on this node' : undefined
    case 409:
      return op === 'post service'
        ? "open the admin's publishing session (same cohort, same peer) on this node first, and sign under its current challenge (session.challenge)"
        : undefined
    case 429:
      return 'this client holds too many sessions or cohorts on the node: close some'
    case 503:
    case 504:
    case 502:
      return 'the broker is busy or unreachable: try again later'
  }
  return undefined
}

/**
 * The node closed the session: the WebSocket close code and reason, and the
 * whole reason of the error frame that preceded the close, if any.
 */
export class CloseError extends BpsError {
  readonly code: number
  /** The close frame's reason (at most 123 bytes). */
  readonly reason: string
  /** The error frame's whole reason, when the node sent one. */
  readonly nodeReason?: string

  constructor(code: number, reason: string, nodeReason?: string) {
    const why = nodeReason || reason || 'no reason given'
    super(`session closed: ${code} ${why}`, closeHint(code, why))
    this.code = code
    this.reason = reason
    this.nodeReason = nodeReason
  }

  /** The admin ended the cohort (END_OF_STREAM): nothing more will come. */
  get endOfStream(): boolean {
    return this.code === CloseCode.Normal && /end of stream/.test(this.nodeReason ?? this.reason)
  }

  /**
   * Whether opening the session again may succeed: the connection or the
   * broker's stream was lost, the node restarts, the broker is full, or the
   * session read too slowly. Not for a frame the node refused.
   */
  get retryable(): boolean {
    switch (this.code) {
      case CloseCode.GoingAway:
      case CloseCode.Abnormal:
      case CloseCode.InternalError:
      case CloseCode.TryAgainLater:
        return !/^persist:/.test(this.nodeReason ?? this.reason)
      case CloseCode.Policy:
        return /slow consumer|not admitted/.test(this.nodeReason ?? this.reason)
    }
    return false
  }
}

function closeHint(code: number, why: string): string | undefined {
  switch (code) {
    case CloseCode.InvalidFrame:
      return 'the node refused a frame as not a valid publication of this session\'s address in the cohort (or a ROSTER/EOS from a session not the admin\'s)'
    case CloseCode.Policy:
      if (/slow consumer/.test(why)) return 'read the session\'s events faster'
      if (/not a publisher|waiting|revoked/.test(why)) return 'send only while the session is ready'
      return undefined
    case CloseCode.TooBig:
      return 'a payload is at most 4096 bytes'
    case CloseCode.TryAgainLater:
      return 'try again later'
    case CloseCode.InternalError:
      if (/^persist:/.test(why)) return 'the upload failed: check the postage batch (GET /stamps)'
      return undefined
  }
  return undefined
}

/**
 * The client refused to sign: a DATA index outside [its feed cursor, cursor
 * + 1024), a second content at an index it signed, a challenge frame for
 * another address or topic (docs/protocol.md, "Publishers").
 */
export class SignError extends BpsError {}

/**
 * A browser could not open the session and cannot read why: a browser does
 * not expose the status of a refused WebSocket upgrade, and a plain request
 * to the same URL passed the node's checks of the parameters.
 */
export class HandshakeError extends BpsError {}

/** A wait ran out of time. */
export class TimeoutError extends BpsError {}

/** A session operation that needs another state (send while not ready, on a closed session). */
export class StateError extends BpsError {}
