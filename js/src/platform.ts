// Node: the ws package (Node 20 has no global WebSocket), which sends the
// session's headers and reads the body of a refused upgrade, and Node's
// crypto for random ids (Node 18 has no global crypto). Browsers get
// platform.browser.ts instead (package.json "browser").
import { webcrypto } from 'node:crypto'
import WebSocket from 'ws'
import { BpsError, HttpError } from './errors.js'
import { Connect, Socket } from './transport.js'

/** Whether this transport sends the session's swarm-* headers. */
export const sendsHeaders = true

/** n random bytes. */
export function randomBytes(n: number): Uint8Array {
  return webcrypto.getRandomValues(new Uint8Array(n))
}

export const connect: Connect = (url, headers, h) => {
  const ws = new WebSocket(url, { headers, maxPayload: 1 << 20, handshakeTimeout: 45_000 })
  let opened = false
  let ended = false
  const refuse = (err: BpsError) => {
    if (ended) return
    ended = true
    h.refused(err)
  }
  ws.on('open', () => {
    opened = true
    h.open()
  })
  ws.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer)
    if (isBinary) h.binary(new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength))
    else h.text(buf.toString('utf8'))
  })
  ws.on('unexpected-response', (req, res) => {
    const parts: Buffer[] = []
    res.on('data', (c: Buffer) => parts.push(c))
    res.on('end', () => {
      refuse(HttpError.fromBody('open session', res.statusCode ?? 0, Buffer.concat(parts).toString('utf8'), res.headers['retry-after'] as string | undefined))
      req.destroy()
    })
    res.on('error', () => {
      refuse(new HttpError('open session', res.statusCode ?? 0, res.statusMessage ?? '', []))
      req.destroy()
    })
  })
  ws.on('error', (err: Error) => {
    if (!opened) refuse(new BpsError(`open session: ${err.message}`, 'is the node running, and its API at this URL?'))
  })
  ws.on('close', (code: number, reason: Buffer) => {
    if (!opened) {
      refuse(new BpsError('open session: the connection closed before the upgrade'))
      return
    }
    if (ended) return
    ended = true
    h.closed(code, reason.toString('utf8'))
  })
  const s: Socket = {
    sendText: (d) => ws.send(d),
    sendBinary: (d) => ws.send(d, { binary: true }),
    close: (code, reason) => {
      if (ws.readyState === WebSocket.CONNECTING) {
        ws.terminate()
        return
      }
      ws.close(code, reason)
      // A node busy in an upload answers the close frame late: as the node
      // waits 2 s for a dApp's, the client waits 3 s for the node's.
      setTimeout(() => ws.terminate(), 3_000).unref()
    },
  }
  return s
}
