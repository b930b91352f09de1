// Browsers: the global WebSocket. It cannot send headers, and it hides the
// status of a refused upgrade: the session then asks the node the same URL
// as a plain GET, which answers a refused parameter as the upgrade would.
import { BpsError, HandshakeError, HttpError } from './errors.js'
import { Connect } from './transport.js'

/** Whether this transport sends the session's swarm-* headers: a browser's WebSocket cannot. */
export const sendsHeaders = false

/** n random bytes. */
export function randomBytes(n: number): Uint8Array {
  return globalThis.crypto.getRandomValues(new Uint8Array(n))
}

async function probe(url: string): Promise<BpsError> {
  const http = url.replace(/^ws/, 'http')
  try {
    const res = await fetch(http)
    const body = await res.text()
    const err = HttpError.fromBody('open session', res.status, body, res.headers.get('retry-after'))
    if (res.status !== 400 || !/websocket upgrade/i.test(err.nodeMessage)) return err
  } catch {
    // the node, or its CORS policy, does not answer a plain request
  }
  return new HandshakeError(
    'open session: no WebSocket to the node, and a browser does not say why',
    "CORS or the node: the node does not allow this page's origin (add it to its cors-allowed-origins) or this host name (bps-api-allowed-hosts), or it is not running at this URL; every other refusal reaches the page as a close code",
  )
}

export const connect: Connect = (url, _headers, h) => {
  const ws = new globalThis.WebSocket(url)
  ws.binaryType = 'arraybuffer'
  let opened = false
  let ended = false
  ws.onopen = () => {
    opened = true
    h.open()
  }
  ws.onmessage = (ev: MessageEvent) => {
    if (typeof ev.data === 'string') h.text(ev.data)
    else h.binary(new Uint8Array(ev.data as ArrayBuffer))
  }
  ws.onclose = (ev: CloseEvent) => {
    if (ended) return
    ended = true
    if (opened) h.closed(ev.code, ev.reason)
    else void probe(url).then((err) => h.refused(err))
  }
  return {
    sendText: (d) => ws.send(d),
    sendBinary: (d) => ws.send(d),
    close: (code, reason) => ws.close(code, reason),
  }
}
