// Publish → receive latency of this client on a running dev cluster, as
// `bee-bps bench-node` measures the Go client's: a publishing session on
// the second node, a subscriber on the third, the first node the broker, on
// one cohort (a live-stream: binding feed with an admin). Like bench-node,
// it first publishes until the subscriber has received 5 updates (untimed:
// the connections, the JIT and the broker's first stream are warm). Prints
// p50 and p99 of two clocks: from send() called (signing included: what a
// dApp sees) and from the frame written (signed before the clock starts,
// as bench-node does). In Node, or with --browser in a page of Debian's
// headless Chromium (CHROMIUM_PATH, default /usr/bin/chromium) that loads
// the default browser bundle (dist/browser/bps.js, @noble/curves signs)
// from its own origin, or with --browser-wasm the WebAssembly one
// (dist/browser/bps.wasm.js).
//
// It also splits the path at the runtime's WebSocket (a wrapper on its
// send and on its message events, installed before the client opens its
// sockets; a few µs): send() called → the frame handed to WebSocket.send
// (preparing and signing), WebSocket.send's own time, send returned → the
// subscriber's socket's message event (both runtimes' sockets, the bridges
// and the cluster), that event → the session's message event (the client's
// receive). The page is cross-origin isolated (COOP and COEP headers), so
// its clock has 5 µs steps, not 100 µs.
//
// Chromium runs as Playwright launches it (headless; among its default
// switches --disable-background-timer-throttling,
// --disable-renderer-backgrounding and
// --disable-backgrounding-occluded-windows: a benchmark's page is never
// throttled as a background tab is) plus --no-sandbox and --disable-gpu
// (the page draws nothing). The page reports its visibilityState.
// CHROMIUM_FLAGS adds switches (a diagnostic: --single-process, say, shows
// what the browser's process hops cost; no dApp user runs with it).
//
// --echo needs no cluster: the round trip of one binary WebSocket frame of
// the publisher's size (124 bytes) to an echo server on loopback (the ws
// package's, in this process), from Node and from a page of Chromium, one
// at a time at the same rate — what each runtime's WebSocket costs before
// any BPS code, the browser's floor; split into out (the page's send → the
// server's message) and in (the server's send → the page's message event)
// by the server's clock, both clocks the wall clock's (performance.timeOrigin:
// the split is as good as the two origins agree; the round trip is exact).
//
//   node scripts/bench-latency.mjs [--browser|--browser-wasm] <info file> [messages=100] [rate=10]
//   node scripts/bench-latency.mjs --echo [messages=100] [rate=10]
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const WARMUP = 5
const args = process.argv.slice(2)
const mode = args[0] === '--browser' || args[0] === '--browser-wasm' ? 'browser' : args[0] === '--echo' ? 'echo' : 'node'
const bundleFile = args[0] === '--browser-wasm' ? 'bps.wasm.js' : 'bps.js'
const rest = mode === 'node' ? args : args.slice(1)

// The measurement, run as it is in Node or in the page (bps: the client's module).
async function measure(bps, cfg, WS) {
  // The split at the runtime's WebSocket: when a binary frame was handed to
  // send and when send returned; when a socket's message event began.
  const at = { handed: 0, sent: 0, arrived: 0 }
  const send = WS.prototype.send
  WS.prototype.send = function (data, ...rest) {
    const binary = typeof data !== 'string'
    if (binary) at.handed = performance.now()
    const r = send.call(this, data, ...rest)
    if (binary) at.sent = performance.now()
    return r
  }
  if (typeof WS.prototype.emit === 'function') {
    // ws: an EventEmitter, whose listeners run inside emit
    const emit = WS.prototype.emit
    WS.prototype.emit = function (ev, ...rest) {
      if (ev === 'message') at.arrived = performance.now()
      return emit.call(this, ev, ...rest)
    }
  } else {
    // the page's WebSocket: a listener added at construction runs before the client's onmessage
    const Base = WS
    globalThis.WebSocket = class extends Base {
      constructor(...a) {
        super(...a)
        this.addEventListener('message', () => (at.arrived = performance.now()))
      }
    }
  }
  const key = Array.from(globalThis.crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, '0')).join('')
  const cohort = { topic: `bench-${Date.now()}`, binding: 'feed', admin: bps.addressOf(key).toHex() }
  const sub = new bps.BpsClient({ api: cfg.subApi, peer: cfg.broker }).subscribe(cohort)
  await sub.ready(30_000)
  const pub = new bps.BpsClient({ api: cfg.pubApi, peer: cfg.broker }).publish(cohort, key)
  await pub.ready(30_000)
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
  // Warm-up: updates 0 to 4 (at least), untimed.
  let warm = 0
  const offWarm = sub.on('message', () => warm++)
  const warmDeadline = Date.now() + 30_000
  while (warm < cfg.warmup) {
    if (Date.now() > warmDeadline) throw new Error(`warm-up: ${warm} of ${cfg.warmup} updates received in 30 s`)
    pub.send('warm-up')
    await sleep(1000 / cfg.rate)
  }
  offWarm()
  const base = Number(pub.index) // the first measured update's index
  const called = new Map() // index → send() called
  const written = new Map() // index → frame written (signing done)
  const sent = new Map() // index → WebSocket.send returned
  const total = []
  const wire = []
  const signing = []
  const split = { prepare: [], wsSend: [], after: [], wsToWs: [], receive: [] }
  sub.on('message', (m) => {
    const now = performance.now()
    const i = Number(m.index)
    if (called.has(i)) total.push(now - called.get(i))
    if (written.has(i)) wire.push(now - written.get(i))
    if (sent.has(i)) {
      split.wsToWs.push(at.arrived - sent.get(i))
      split.receive.push(now - at.arrived)
    }
  })
  const gap = 1000 / cfg.rate
  for (let n = 0; n < cfg.n; n++) {
    const due = performance.now() + gap
    const i = base + n
    const t0 = performance.now()
    called.set(i, t0)
    pub.send(`message ${n}`) // signs, then writes
    const t1 = performance.now()
    written.set(i, t1)
    signing.push(t1 - t0)
    sent.set(i, at.sent)
    split.prepare.push(at.handed - t0)
    split.wsSend.push(at.sent - at.handed)
    split.after.push(t1 - at.sent)
    await sleep(Math.max(0, due - performance.now())) // the publishing rate
  }
  const deadline = Date.now() + 10_000
  while (total.length < cfg.n && Date.now() < deadline) await sleep(50)
  await pub.close()
  await sub.close()
  return { backend: bps.signerBackend ?? 'js', received: total.length, total, wire, signing, split, visibility: globalThis.document?.visibilityState, isolated: globalThis.crossOriginIsolated }
}

// The echo floor, run as it is in Node (the ws package) or in the page.
async function echo(WS, cfg) {
  const ws = new WS(cfg.url)
  ws.binaryType = 'arraybuffer'
  await new Promise((ok, fail) => {
    ws.onopen = ok
    ws.onerror = () => fail(new Error('echo: no connection'))
  })
  const frame = new Uint8Array(124)
  const rtt = []
  const stamps = [] // [sent, received back] on the wall clock, for the split by the server's clock
  const wall = () => performance.timeOrigin + performance.now()
  for (let n = 0; n < cfg.warmup + cfg.n; n++) {
    const due = performance.now() + 1000 / cfg.rate
    const back = new Promise((ok) => (ws.onmessage = () => ok(wall())))
    const t0 = wall()
    ws.send(frame)
    const t3 = await back
    stamps.push([t0, t3])
    if (n >= cfg.warmup) rtt.push(t3 - t0)
    await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())))
  }
  ws.close()
  return { rtt, stamps }
}

// Runs f(the page's module bps, cfg) in a page of headless Chromium that loads the bundle from its own origin.
async function inChromium(f, cfg) {
  const { chromium } = await import('playwright-core')
  const bundle = readFileSync(join(dirname(fileURLToPath(import.meta.url)), `../dist/browser/${bundleFile}`))
  const html = `<!doctype html><script type="importmap">{"imports":{"@ethersphere/bps":"/bps.js"}}</script>
<script type="module">import * as bps from '@ethersphere/bps'; window.bps = bps; document.title = 'ready'</script>`
  // Cross-origin isolated: the page's performance.now() then has 5 µs steps (100 µs otherwise).
  const isolated = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' }
  const site = createServer((req, res) => {
    if (req.url === '/bps.js') res.writeHead(200, { 'content-type': 'text/javascript', ...isolated }).end(bundle)
    else res.writeHead(200, { 'content-type': 'text/html', ...isolated }).end(html)
  })
  await new Promise((ok) => site.listen(0, '127.0.0.1', ok))
  const extra = (process.env.CHROMIUM_FLAGS ?? '').split(/\s+/).filter(Boolean)
  const b = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', ...extra] })
  try {
    const page = await b.newPage()
    await page.goto(`http://127.0.0.1:${site.address().port}/`)
    await page.waitForFunction(() => document.title === 'ready')
    return await page.evaluate(`(${f.toString()})(${f === echo ? 'WebSocket' : 'window.bps'}, ${JSON.stringify(cfg)}, WebSocket)`)
  } finally {
    await b.close()
    site.close()
  }
}

const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]
const fmt = (x) => `${x.toFixed(2)} ms`

if (mode === 'echo') {
  const [messages = '100', rate = '10'] = rest
  const { WebSocketServer, WebSocket } = await import('ws')
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 })
  let seen = [] // the server's wall clock at each frame's arrival (it echoes at once)
  server.on('connection', (c) =>
    c.on('message', (d, binary) => {
      seen.push(performance.timeOrigin + performance.now())
      c.send(d, { binary })
    }),
  )
  await new Promise((ok) => server.on('listening', ok))
  const cfg = { url: `ws://127.0.0.1:${server.address().port}/`, n: Number(messages), rate: Number(rate), warmup: WARMUP }
  try {
    for (const name of ['Node (ws)', 'Chromium']) {
      seen = []
      const r = name === 'Chromium' ? await inChromium(echo, cfg) : await echo(WebSocket, cfg)
      const out = r.stamps.map(([t0], i) => seen[i] - t0).slice(cfg.warmup)
      const back = r.stamps.map(([, t3], i) => t3 - seen[i]).slice(cfg.warmup)
      console.log(
        `websocket echo (${name}): ${r.rtt.length} round trips; p50 ${fmt(q(r.rtt, 0.5))} p99 ${fmt(q(r.rtt, 0.99))}; ` +
          `out (send → the server's message) p50 ${fmt(q(out, 0.5))}, in (the server's send → message event) p50 ${fmt(q(back, 0.5))}`,
      )
    }
  } finally {
    server.close()
  }
} else {
  const [info, messages = '100', rate = '10'] = rest
  if (!info) throw new Error('usage: bench-latency.mjs [--browser|--browser-wasm] <info file> [messages] [rate] | --echo [messages] [rate]')
  const cl = JSON.parse(readFileSync(info, 'utf8'))
  const [broker, A, B] = cl.nodes
  const cfg = { pubApi: A.api, subApi: B.api, broker: broker.overlay, n: Number(messages), rate: Number(rate), warmup: WARMUP }
  const r = mode === 'browser' ? await inChromium(measure, cfg) : await measure(await import('../dist/esm/index.js'), cfg, (await import('ws')).WebSocket)
  console.log(
    `js client (${mode === 'browser' ? `Chromium, ${bundleFile}, page ${r.visibility}, cross-origin isolated ${r.isolated}` : 'Node'}; signer ${r.backend}): ${r.received}/${cfg.n} received; send()→receive p50 ${fmt(q(r.total, 0.5))} p99 ${fmt(q(r.total, 0.99))}; ` +
      `written→receive p50 ${fmt(q(r.wire, 0.5))} p99 ${fmt(q(r.wire, 0.99))}; send() (signing) p50 ${fmt(q(r.signing, 0.5))} p99 ${fmt(q(r.signing, 0.99))}`,
  )
  const s = r.split
  console.log(
    `  split, p50: send() → WebSocket.send (preparing, signing) ${fmt(q(s.prepare, 0.5))}; WebSocket.send ${fmt(q(s.wsSend, 0.5))}; send() returning ${fmt(q(s.after, 0.5))}; ` +
      `WebSocket.send returned → the subscriber socket's message event ${fmt(q(s.wsToWs, 0.5))}; that event → the session's message ${fmt(q(s.receive, 0.5))}`,
  )
}
