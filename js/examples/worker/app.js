// A ticker: one page publishes updates at a steady rate (100 a second by
// default) and reads them back through another node, while the page's main
// thread is watched: long tasks (the browser's PerformanceObserver, > 50 ms)
// and the lag of a 10 ms timer. The key lives in a Web Worker
// (signer.worker.js): the session gets a signer { address, sign } whose
// sign posts to the worker, and publishes with session.publish(), which
// waits for it and sends in call order. ?signer=main signs on the page
// instead (the key given to the session), to compare.
//
// Query: api (the publisher's node), sub (the reader's node, default api),
// peer (the broker: overlay or multiaddr), rate, count, signer.
import { addressOf, Session } from '@ethersphere/bps'

const q = new URLSearchParams(location.search)
const api = q.get('api') ?? 'http://127.0.0.1:1633'
const sub = q.get('sub') ?? api
const peer = q.get('peer') ?? ''
const rate = Number(q.get('rate') ?? 100)
const count = Number(q.get('count') ?? 500)
const mode = q.get('signer') ?? 'worker'
const $ = (id) => document.getElementById(id)
const show = (id, text) => ($(id).textContent = text)

/** A signer whose key is in the worker: { address, sign } as the client takes it. */
export async function workerSigner(worker) {
  let next = 0
  const pending = new Map()
  worker.onmessage = (e) => {
    const p = pending.get(e.data.id)
    pending.delete(e.data.id)
    if (e.data.error) p.reject(new Error(e.data.error))
    else p.resolve(e.data)
  }
  const call = (msg) =>
    new Promise((resolve, reject) => {
      const id = next++
      pending.set(id, { resolve, reject })
      worker.postMessage({ id, ...msg })
    })
  const { address } = await call({ op: 'init' })
  return { address, sign: async (data) => (await call({ op: 'sign', data })).signature }
}

/** The main thread's health while it runs: long tasks and a 10 ms timer's lag. */
function watchMainThread() {
  const longTasks = []
  const obs = new PerformanceObserver((l) => l.getEntries().forEach((e) => longTasks.push(e.duration)))
  obs.observe({ type: 'longtask', buffered: false })
  const lags = []
  let due = performance.now() + 10
  const timer = setInterval(() => {
    const now = performance.now()
    lags.push(Math.max(0, now - due))
    due = now + 10
  }, 10)
  return () => {
    obs.disconnect()
    clearInterval(timer)
    return { longTasks, lags }
  }
}

const pct = (xs, p) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] : 0)

async function run() {
  let key
  if (mode === 'worker') key = await workerSigner(new Worker(new URL('./signer.worker.js', import.meta.url), { type: 'module' }))
  else key = crypto.getRandomValues(new Uint8Array(32))
  // The reader's session first, then the publisher's (the worker signs its AUTH
  // under each challenge the node sends).
  const admin = mode === 'worker' ? key.address : addressOf(key).toHex()
  show('me', admin)
  const cohort = { topic: `ticker-${admin}-${Date.now()}`, binding: 'feed', admin }
  const reader = new Session({ api: sub, peer, cohort })
  const got = new Map() // index → publish() called → received (ms)
  const called = new Map()
  let dup = 0
  const events = [] // disconnections and gaps, as they came
  reader.on('disconnect', (e) => events.push(`reader disconnected (${e.retry ? 'retrying' : 'for good'}): ${e.error.message}`))
  reader.on('gap', (e) => events.push(`reader: gap ${e.from}-${e.to}`))
  reader.on('message', (m) => {
    const i = Number(m.index)
    if (got.has(i)) dup++
    else got.set(i, performance.now() - called.get(i))
    show('got', String(got.size))
  })
  await reader.ready(30_000)
  const pub = new Session({ api, peer, cohort, key })
  pub.on('disconnect', (e) => events.push(`publisher disconnected (${e.retry ? 'retrying' : 'for good'}): ${e.error.message}`))
  await pub.ready(30_000)
  show('state', 'publishing')

  const stop = watchMainThread()
  const start = performance.now()
  const sent = []
  await new Promise((done) => {
    let i = 0
    const tick = () => {
      const due = Math.min(count, Math.floor(((performance.now() - start) * rate) / 1000) + 1)
      for (; i < due; i++) {
        called.set(i, performance.now())
        sent.push(pub.publish(`tick ${i} ${new Date().toISOString()}`))
      }
      if (i < count) setTimeout(tick, 1000 / rate)
      else done()
    }
    tick()
  })
  await Promise.all(sent)
  const deadline = performance.now() + 30_000
  while (got.size < count && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  const { longTasks, lags } = stop()
  const latencies = [...got.values()]
  const result = {
    mode,
    rate,
    count,
    received: got.size,
    duplicates: dup,
    missing: Array.from({ length: count }, (_, i) => i).filter((i) => !got.has(i)),
    seconds: (performance.now() - start) / 1000,
    longTasks: { count: longTasks.length, totalMs: longTasks.reduce((a, b) => a + b, 0), maxMs: Math.max(0, ...longTasks) },
    timerLagMs: { p50: pct(lags, 0.5), p99: pct(lags, 0.99), max: Math.max(0, ...lags) },
    publishToReceiveMs: { p50: pct(latencies, 0.5), p99: pct(latencies, 0.99) },
    events,
  }
  await pub.close()
  await reader.close()
  show('state', 'done')
  $('result').textContent = JSON.stringify(result, null, 2)
  return result
}

if (!peer) show('state', 'give the nodes and the broker in the address: ?api=…&sub=…&peer=… (scripts/serve-example.mjs prints it)')
else
  window.result = run().catch((e) => {
    show('state', `failed: ${e.message}`)
    throw e
  })
