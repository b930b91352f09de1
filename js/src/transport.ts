import { BpsError } from './errors.js'

/** What a transport reports of one WebSocket connection; exactly one of refused and closed ends it. */
export interface SocketHandlers {
  open(): void
  text(data: string): void
  binary(data: Uint8Array): void
  /** The connection, once open, closed: the close frame's code and reason (1006 without one). */
  closed(code: number, reason: string): void
  /** The connection never opened: the node's HTTP answer, or why not. */
  refused(err: BpsError): void
}

export interface Socket {
  sendText(data: string): void
  sendBinary(data: Uint8Array): void
  close(code: number, reason: string): void
}

/** Opens url; headers are the session's swarm-* headers. */
export type Connect = (url: string, headers: Record<string, string>, h: SocketHandlers) => Socket
