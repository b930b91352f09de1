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
// the browser bundle (dist/browser/bps.js) from its own origin.
//
// --echo needs no cluster: the round trip of one binary WebSocket frame of
// the publisher's size (124 bytes) to an echo server on loopback (the ws
// package's, in this process), from Node and from a page of Chromium, one
// at a time at the same rate — what each runtime's WebSocket costs before
// any BPS code, the browser's floor.
//
//   node scripts/bench-latency.mjs [--browser] <info file> [messages=100] [rate=10]
//   node scripts/bench-latency.mjs --echo [messages=100] [rate=10]
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const WARMUP = 5
const args = process.argv.slice(2)
const mode = args[0] === '--browser' ? 'browser' : args[0] === '--echo' ? 'echo' : 'node'
const rest = mode === 'node' ? args : args.slice(1)

// The measurement, run as it is in Node or in the page (bps: the client's module).
async function measure(bps, cfg) {
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
  const total = []
  const wire = []
  const signing = []
  sub.on('message', (m) => {
    const now = performance.now()
    const i = Number(m.index)
    if (called.has(i)) total.push(now - called.get(i))
    if (written.has(i)) wire.push(now - written.get(i))
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
    await sleep(Math.max(0, due - performance.now())) // the publishing rate
  }
  const deadline = Date.now() + 10_000
  while (total.length < cfg.n && Date.now() < deadline) await sleep(50)
  await pub.close()
  await sub.close()
  return { received: total.length, total, wire, signing }
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
  for (let n = 0; n < cfg.warmup + cfg.n; n++) {
    const due = performance.now() + 1000 / cfg.rate
    const back = new Promise((ok) => (ws.onmessage = ok))
    const t0 = performance.now()
    ws.send(frame)
    await back
    if (n >= cfg.warmup) rtt.push(performance.now() - t0)
    await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())))
  }
  ws.close()
  return { rtt }
}

// Runs f(the page's module bps, cfg) in a page of headless Chromium that loads the bundle from its own origin.
async function inChromium(f, cfg) {
  const { chromium } = await import('playwright-core')
  const bundle = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '../dist/browser/bps.js'))
  const html = `<!doctype html><script type="importmap">{"imports":{"@ethersphere/bps":"/bps.js"}}</script>
<script type="module">import * as bps from '@ethersphere/bps'; window.bps = bps; document.title = 'ready'</script>`
  const site = createServer((req, res) => {
    if (req.url === '/bps.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle)
    else res.writeHead(200, { 'content-type': 'text/html' }).end(html)
  })
  await new Promise((ok) => site.listen(0, '127.0.0.1', ok))
  const b = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  try {
    const page = await b.newPage()
    await page.goto(`http://127.0.0.1:${site.address().port}/`)
    await page.waitForFunction(() => document.title === 'ready')
    return await page.evaluate(`(${f.toString()})(${f === echo ? 'WebSocket' : 'window.bps'}, ${JSON.stringify(cfg)})`)
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
  server.on('connection', (c) => c.on('message', (d, binary) => c.send(d, { binary })))
  await new Promise((ok) => server.on('listening', ok))
  const cfg = { url: `ws://127.0.0.1:${server.address().port}/`, n: Number(messages), rate: Number(rate), warmup: WARMUP }
  try {
    for (const [name, r] of [
      ['Node (ws)', await echo(WebSocket, cfg)],
      ['Chromium', await inChromium(echo, cfg)],
    ]) {
      console.log(`websocket echo (${name}): ${r.rtt.length} round trips; p50 ${fmt(q(r.rtt, 0.5))} p99 ${fmt(q(r.rtt, 0.99))}`)
    }
  } finally {
    server.close()
  }
} else {
  const [info, messages = '100', rate = '10'] = rest
  if (!info) throw new Error('usage: bench-latency.mjs [--browser] <info file> [messages] [rate] | --echo [messages] [rate]')
  const cl = JSON.parse(readFileSync(info, 'utf8'))
  const [broker, A, B] = cl.nodes
  const cfg = { pubApi: A.api, subApi: B.api, broker: broker.overlay, n: Number(messages), rate: Number(rate), warmup: WARMUP }
  const r = mode === 'browser' ? await inChromium(measure, cfg) : await measure(await import('../dist/esm/index.js'), cfg)
  console.log(
    `js client (${mode === 'browser' ? 'Chromium' : 'Node'}): ${r.received}/${cfg.n} received; send()→receive p50 ${fmt(q(r.total, 0.5))} p99 ${fmt(q(r.total, 0.99))}; ` +
      `written→receive p50 ${fmt(q(r.wire, 0.5))} p99 ${fmt(q(r.wire, 0.99))}; send() (signing) p50 ${fmt(q(r.signing, 0.5))} p99 ${fmt(q(r.signing, 0.99))}`,
  )
}
