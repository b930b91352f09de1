// @ethersphere/bps: a client of a BPS node's WebSocket API (/pubsub), for
// Node and browsers. Keys, SOCs and BMT are bee-js's; signatures @noble/curves'.
export { BpsClient } from './client.js'
export type { ClientOptions } from './client.js'
export { Session } from './session.js'
export type { CloseEvent, DisconnectEvent, ReconnectOptions, SessionEvents, SessionOptions, SessionState } from './session.js'
export type { Binding, Cohort } from './spec.js'
export { topicBytes } from './topic.js'
export type { ChallengeEvent, EquivocationEvent, Field, Message, RangeEvent, ReadyEvent, ServiceEvent, StaleEvent, WaitingEvent } from './frames.js'
export { BpsError, CloseCode, CloseError, HandshakeError, HttpError, SignError, StateError, TimeoutError, ValidationError } from './errors.js'
export type { Reason } from './errors.js'
export { postService } from './post.js'
export type { PostServiceOptions } from './post.js'
export { serviceBody, serviceChunkWith, serviceRequest } from './service.js'
export type { ServiceMessage } from './service.js'
export { channelId, encodeRoster, inboundFrame, Kind, kindId, kindName, kindPrefix, MAX_INDEX, sessionId, sessionTopic, signChunk, socData } from './sessionfeed.js'
export type { KindName } from './sessionfeed.js'
export { FeedCursor, FeedCursors, HELD, WINDOW } from './cursor.js'
export { addressOf, feedId, mineOwnerId, PO_MIN, proximity, signerBackend, signSOC, signWithKey, socAddress } from './soc.js'
export type { SignedSOC, Signer } from './soc.js'
export { parseFrame } from './json.js'
export { decodeMessage } from './frames.js'

import { Bytes } from '@ethersphere/bee-js'
import { BytesLike, toBytes } from './bytes.js'
import { socAddress } from './soc.js'

/** The topic of binding 'anchor' without admin, and of the GSOC session: the SOC address keccak256(id ‖ owner). */
export function anchorTopic(id: BytesLike, owner: BytesLike): Uint8Array {
  return socAddress(id, owner)
}

/** The topic of binding 'owner' without admin (a live MIC): keccak256(owner). */
export function ownerTopic(owner: BytesLike): Uint8Array {
  return Bytes.keccak256(toBytes(owner, 20, 'owner')).toUint8Array()
}
