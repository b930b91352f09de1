// What this client's keys signed, per feed (docs/protocol.md, "Publishers"):
// a publisher's DATA feed on a topic is one index space at every broker and
// in storage, so the client never signs a second content at an index, and
// never an index far from its own cursor — a node cannot make it sign
// index 2^64-2, which would end its feed everywhere.
import { equal, hex } from './bytes.js'
import { SignError } from './errors.js'
import { MAX_INDEX } from './sessionfeed.js'

/** How far past its cursor a client signs: DATA at [cursor, cursor + WINDOW). */
export const WINDOW = 1024n
/** How many of the latest signed payloads a feed keeps, to re-sign one under a new challenge. */
export const HELD = 1024

/**
 * One feed of one key: the lowest index the key never signed (next), and
 * the payloads of the last HELD indexes it signed, to re-sign one at the
 * same index under a newer challenge (the node's `stale` frame).
 */
export class FeedCursor {
  private _next: bigint
  private readonly held = new Map<bigint, Uint8Array>()

  constructor(next = 0n) {
    this._next = next
  }

  /** The lowest index this key has never signed on this feed. */
  get next(): bigint {
    return this._next
  }

  /** Moves the cursor forward to at least index (a cursor the dApp kept, e.g. across a reload); never back. */
  raise(index: bigint): void {
    if (index > MAX_INDEX + 1n) throw new SignError(`cursor ${index}: past the last index ${MAX_INDEX}`)
    if (index > this._next) this._next = index
  }

  /**
   * Whether payload may be signed at index: at or above the cursor within
   * the window, or below it only the very payload signed there before (a
   * re-signature). Throws a SignError otherwise.
   */
  check(index: bigint, payload: Uint8Array): void {
    if (index > MAX_INDEX) throw new SignError(`index ${index}: past the last index ${MAX_INDEX}`)
    if (index >= this._next) {
      if (index - this._next >= WINDOW) {
        throw new SignError(`index ${index} is ${index - this._next} past this key's feed cursor ${this._next}: the client signs at most ${WINDOW} ahead`)
      }
      return
    }
    const p = this.held.get(index)
    if (!p) throw new SignError(`index ${index} is below this key's feed cursor ${this._next} and its payload is not held: never a second content at an index`)
    if (!equal(p, payload)) throw new SignError(`index ${index} was signed with another payload: never a second content at an index`)
  }

  /**
   * check, then takes index as signed with payload: the cursor moves past
   * it. Returns the cursor before, for release.
   */
  take(index: bigint, payload: Uint8Array): bigint {
    this.check(index, payload)
    const before = this._next
    if (index >= this._next) this._next = index + 1n
    this.held.delete(index)
    this.held.set(index, payload.slice())
    if (this.held.size > HELD) this.held.delete(this.held.keys().next().value as bigint)
    return before
  }

  /**
   * Undoes take(index) that returned before, if nothing was taken since:
   * its signature was never sent, so the index is free again. A take below
   * the cursor (a re-signature) is not undone: that payload stays the
   * index's.
   */
  release(index: bigint, before: bigint): void {
    if (index >= before && this._next === index + 1n) {
      this._next = before
      this.held.delete(index)
    }
  }

  /** The payload signed at index, if still held. */
  payload(index: bigint): Uint8Array | undefined {
    return this.held.get(index)
  }
}

/**
 * The feed cursors of the keys a program signs with, per (owner, topic):
 * every session of one key on one topic shares one (sessions are given the
 * process's by default). Bounded: the least recently used of more than
 * `max` feeds is forgotten (its next session starts from its `index`
 * option).
 */
export class FeedCursors {
  private readonly feeds = new Map<string, FeedCursor>()
  constructor(private readonly max = 4096) {}

  /** The cursor of owner's feed on topic, made at start (default 0) if new, and raised to start if given. */
  get(owner: Uint8Array, topic: Uint8Array, start?: bigint): FeedCursor {
    const k = hex(owner) + hex(topic)
    let c = this.feeds.get(k)
    if (c) this.feeds.delete(k)
    else c = new FeedCursor()
    this.feeds.set(k, c)
    if (this.feeds.size > this.max) this.feeds.delete(this.feeds.keys().next().value as string)
    if (start !== undefined) c.raise(start)
    return c
  }
}

/** The process's feed cursors, which sessions use unless given their own. */
export const defaultFeedCursors = new FeedCursors()
