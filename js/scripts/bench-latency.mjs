// Publish → receive latency of this client on a running dev cluster, as
// `bee-bps bench-node` measures the Go client's: a publishing session on
// the second node, a subscriber on the third, the first node the broker, on
// one cohort (a live-stream: binding feed with an admin). Prints p50 and p99
// of two clocks: from send() called (signing included: what a dApp sees)
// and from the frame written (signed before the clock starts, as
// bench-node does).
//
//   node scripts/bench-latency.mjs <info file> [messages=100] [rate=10]
import { readFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { BpsClient } from '../dist/esm/index.js'

const [info, messages = '100', rate = '10'] = process.argv.slice(2)
if (!info) throw new Error('usage: bench-latency.mjs <info file> [messages] [rate]')
const cl = JSON.parse(readFileSync(info, 'utf8'))
const [broker, A, B] = cl.nodes
const key = randomBytes(32).toString('hex')
const { addressOf } = await import('../dist/esm/index.js')
const cohort = { topic: `bench-${Date.now()}`, binding: 'feed', admin: addressOf(key).toHex() }
const sub = new BpsClient({ api: B.api, peer: broker.overlay }).subscribe(cohort)
await sub.ready(30_000)
const pub = new BpsClient({ api: A.api, peer: broker.overlay }).publish(cohort, key)
await pub.ready(30_000)

const called = new Map() // index → send() called
const written = new Map() // index → frame written (signing done)
const total = []
const wire = []
sub.on('message', (m) => {
  const now = performance.now()
  const i = Number(m.index)
  if (called.has(i)) total.push(now - called.get(i))
  if (written.has(i)) wire.push(now - written.get(i))
})
const n = Number(messages)
const gap = 1000 / Number(rate)
for (let i = 0; i < n; i++) {
  const due = performance.now() + gap
  called.set(i, performance.now())
  pub.send(`message ${i}`) // signs, then writes
  written.set(i, performance.now())
  await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now()))) // the publishing rate
}
const deadline = Date.now() + 10_000
while (total.length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]
const fmt = (x) => `${x.toFixed(2)} ms`
console.log(`js client: ${total.length}/${n} received; send()→receive p50 ${fmt(q(total, 0.5))} p99 ${fmt(q(total, 0.99))}; written→receive p50 ${fmt(q(wire, 0.5))} p99 ${fmt(q(wire, 0.99))}; signing p50 ${fmt(q(total, 0.5) - q(wire, 0.5))}`)
await pub.close()
await sub.close()
