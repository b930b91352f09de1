// The session's protocol logic against a fake transport: what it sends,
// how it reads the node's frames, and reconnecting with a cursor.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { PrivateKey } from '@ethersphere/bee-js'
import { anchorTopic, CloseError, feedId, HttpError, Session, signWithKey, socAddress, StateError, ValidationError } from '../../dist/esm/index.js'

const hex = (b) => Buffer.from(b).toString('hex')
const key = new PrivateKey('4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d')
const admin = key.publicKey().address().toHex()
const topic = 'ab'.repeat(32)

/** A transport whose connections the test drives: conn() is the next one opened. */
function driver(sendsHeaders = true) {
  const conns = []
  let i = 0
  return {
    transport: {
      sendsHeaders,
      connect(url, headers, h) {
        const c = { url: new URL(url), headers, h, sent: [] }
        c.socket = { sendText: (d) => c.sent.push(d), sendBinary: (d) => c.sent.push(new Uint8Array(d)), close: (code, reason) => (c.closed = [code, reason]) }
        conns.push(c)
        return c.socket
      },
    },
    conn: async () => {
      for (let n = 0; conns.length <= i; n++) {
        if (n > 5000) throw new Error('no connection opened')
        await new Promise((r) => setTimeout(r, 1))
      }
      return conns[i++]
    },
  }
}

const text = (c, f) => c.h.text(JSON.stringify(f))
const ready = (c, extra = {}) => text(c, { type: 'ready', role: 'subscriber', topic, binding: 'feed', broker: 'cd'.repeat(32), fields: c.url.searchParams.get('swarm-soc-fields') ?? 'payload', ...extra })

function update(index, payload = 'x') {
  // address ‖ index ‖ payload, as a feed session asks for them
  const addr = socAddress(feedId(Buffer.from(topic, 'hex'), index), admin)
  const b = new Uint8Array(32 + 8 + payload.length)
  b.set(addr, 0)
  new DataView(b.buffer).setBigUint64(32, index)
  b.set(Buffer.from(payload), 40)
  return b
}

test('a feed subscriber resumes at its cursor after a lost connection, without copies', async () => {
  const d = driver()
  const s = new Session({ api: 'http://127.0.0.1:1', peer: 'cd'.repeat(32), cohort: { topic, binding: 'feed', admin }, resume: 5, transport: d.transport, reconnect: { initialDelay: 1, maxDelay: 5 } })
  const got = []
  s.on('message', (m) => got.push([m.index, m.owner, m.recovered]))
  const c1 = await d.conn()
  assert.equal(c1.url.searchParams.get('index'), '5')
  assert.equal(c1.url.searchParams.get('admin'), admin)
  assert.equal(c1.url.searchParams.get('swarm-soc-fields'), 'address,index,payload', 'a feed session asks for address and index')
  assert.deepEqual(c1.headers, {}, 'every parameter in the query: a browser sends no headers')
  ready(c1)
  text(c1, { type: 'recovered', addr: admin, from: 5, to: 6 })
  c1.h.binary(update(5n))
  c1.h.binary(update(6n))
  c1.h.binary(update(7n))
  assert.equal(s.cursor, 8n)
  const disc = s.waitFor('disconnect')
  text(c1, { type: 'error', reason: 'the stream to the broker was reset: gone' })
  c1.h.closed(1011, 'stream reset')
  const e = await disc
  assert.ok(e.retry)
  assert.ok(e.error instanceof CloseError)
  assert.equal(e.error.code, 1011)
  assert.equal(e.error.nodeReason, 'the stream to the broker was reset: gone')
  const c2 = await d.conn()
  assert.equal(c2.url.searchParams.get('index'), '8', 'resumes past what it has')
  ready(c2)
  c2.h.binary(update(7n)) // a copy: dropped
  c2.h.binary(update(8n))
  assert.deepEqual(got, [
    [5n, admin, true],
    [6n, admin, true],
    [7n, admin, false],
    [8n, admin, false],
  ])
  const closed = s.close()
  c2.h.closed(1000, 'bye')
  await closed
  assert.equal(s.state, 'closed')
})

test('end of stream ends the session: no reconnect', async () => {
  const d = driver()
  const s = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'feed', admin }, transport: d.transport, reconnect: { initialDelay: 1 } })
  const c = await d.conn()
  ready(c)
  const svc = s.waitFor('service')
  text(c, { type: 'service', kind: 'END_OF_STREAM', index: '2', publishers: [], gap: false })
  assert.equal((await svc).index, 2n)
  const closed = s.waitFor('close')
  text(c, { type: 'error', reason: 'end of stream: the admin ended the cohort' })
  c.h.closed(1000, 'end of stream: the admin ended the cohort')
  const e = await closed
  assert.ok(e.error.endOfStream)
  assert.equal(s.state, 'closed')
  assert.equal((await s.waitFor('close')).error, e.error, 'waiting for the close of a closed session')
  await assert.rejects(s.ready(), (err) => err === e.error)
})

test('a refused session: HTTP reasons reach the caller; 503 is retried after Retry-After, 400 is not', async () => {
  const d = driver()
  const s = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'anchor', admin }, transport: d.transport, reconnect: { initialDelay: 1 } })
  const c1 = await d.conn()
  const disc = s.waitFor('disconnect')
  c1.h.refused(HttpError.fromBody('open session', 503, '{"message":"the broker is full"}', '1'))
  const e = await disc
  assert.ok(e.retry)
  assert.ok(e.delay >= 1000, `waits the Retry-After: ${e.delay}`)
  await s.close()
  const s2 = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'anchor', admin }, transport: d.transport })
  const c2 = await d.conn()
  const ready2 = s2.ready()
  c2.h.refused(HttpError.fromBody('open session', 400, '{"message":"invalid query params","reasons":[{"field":"peer","error":"is this node"}]}'))
  await assert.rejects(ready2, (err) => err instanceof HttpError && err.status === 400 && err.reasons[0].field === 'peer')
})

test('a page\'s refusal is a close with 4000 + the status: the same HttpError, 4400 not retried, 4503 retried', async () => {
  const d = driver(false)
  const s = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'anchor', admin }, transport: d.transport, reconnect: { initialDelay: 1 } })
  const c1 = await d.conn()
  const disc = s.waitFor('disconnect')
  c1.h.open()
  text(c1, { type: 'error', reason: 'node session limit', status: 503, message: 'node session limit: 2 sessions', retryAfter: 2 })
  c1.h.closed(4503, 'node session limit')
  const e = await disc
  assert.ok(e.retry, 'a 4503 is retried')
  assert.ok(e.error instanceof HttpError && e.error.status === 503 && e.error.retryAfter === 2, String(e.error))
  assert.ok(e.delay >= 2000, `waits the Retry-After: ${e.delay}`)
  await s.close()

  const s2 = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'anchor', admin }, transport: d.transport, reconnect: { initialDelay: 1 } })
  const c2 = await d.conn()
  const ready2 = s2.ready()
  const disc2 = s2.waitFor('disconnect')
  c2.h.open()
  text(c2, { type: 'error', reason: 'invalid query params: peer: is this node', status: 400, message: 'invalid query params', reasons: [{ field: 'peer', error: 'is this node' }] })
  c2.h.closed(4400, 'invalid query params: peer: is this node')
  assert.equal((await disc2).retry, false, 'a 4400 is not retried')
  await assert.rejects(ready2, (err) => err instanceof HttpError && err.status === 400 && err.reasons[0].field === 'peer')

  // Without an error frame (the GSOC session): the close reason is the message.
  const s3 = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic }, transport: d.transport })
  const c3 = await d.conn()
  const closed3 = s3.waitFor('close')
  c3.h.open()
  c3.h.closed(4404, 'this node is not connected to the broker')
  const ce = await closed3
  assert.ok(ce.error instanceof HttpError && ce.error.status === 404 && /not connected/.test(ce.error.nodeMessage), String(ce.error))
})

test('api and peer given as functions are read again at each reconnect', async () => {
  const d = driver()
  let peer = 'aa'.repeat(32)
  const s = new Session({ api: () => 'http://127.0.0.1:1', peer: () => peer, cohort: { topic, binding: 'anchor', admin }, transport: d.transport, reconnect: { initialDelay: 1, maxDelay: 2 } })
  const c1 = await d.conn()
  assert.equal(c1.url.searchParams.get('peer'), 'aa'.repeat(32))
  peer = 'bb'.repeat(32)
  c1.h.open()
  c1.h.closed(1001, 'node shutting down')
  const c2 = await d.conn()
  assert.equal(c2.url.searchParams.get('peer'), 'bb'.repeat(32))
  const closed = s.close()
  c2.h.closed(1000, 'bye')
  await closed
})

test('a signer that answers later (a Web Worker, a wallet): claims and publish() wait for it, frames in call order', async () => {
  const d = driver()
  // The worker: the same key, signing as the client does (signWithKey) on
  // a later turn, out of order.
  let n = 0
  const worker = {
    address: admin,
    sign: (data) => new Promise((r) => setTimeout(() => r(signWithKey(key.toUint8Array(), data)), n++ % 2 === 0 ? 20 : 1)),
  }
  const s = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'feed', admin }, key: worker, transport: d.transport })
  assert.equal(s.addr, admin)
  const c = await d.conn()
  const claimed = s.waitFor('claim')
  text(c, { type: 'claim-request', topic, addr: admin, broker: 'cd'.repeat(32), challenge: 'ee'.repeat(32), index: '0' })
  await claimed
  const sync = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'feed', admin }, key, transport: d.transport })
  const cs = await d.conn()
  text(cs, { type: 'claim-request', topic, addr: admin, broker: 'cd'.repeat(32), challenge: 'ee'.repeat(32), index: '0' })
  assert.equal(JSON.parse(c.sent[0]).signature, JSON.parse(cs.sent[0]).signature, 'the same claim signature as the key itself')

  ready(c, { role: 'publisher' })
  assert.throws(() => s.send('now'), (e) => e instanceof StateError && /publish\(\)/.test(e.message))
  const sent = await Promise.all([s.publish('a'), s.publish('b'), s.publish('c')])
  assert.deepEqual(sent.map((x) => x.index), [0n, 1n, 2n])
  const frames = c.sent.slice(1)
  assert.deepEqual(frames.map((f) => new DataView(f.buffer, f.byteOffset).getBigUint64(0)), [0n, 1n, 2n], 'sent in call order')
  ready(cs, { role: 'publisher' })
  const want = sync.send('a')
  assert.equal(hex(frames[0].subarray(8, 73)), hex(want.signature), 'the signature the key makes')
  await Promise.all([s.close(), sync.close()].map((p, i) => ((i ? cs : c).h.closed(1000, 'bye'), p)))
})

test('a publisher answers claim-requests, sends only when ready, frames per binding', async () => {
  const d = driver()
  const s = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'feed', admin }, key, index: 3, transport: d.transport })
  const c = await d.conn()
  assert.equal(c.url.searchParams.get('addr'), admin)
  assert.equal(c.url.searchParams.get('index'), '3')
  assert.throws(() => s.send('early'), StateError)
  text(c, { type: 'claim-request', topic, addr: admin, broker: 'cd'.repeat(32), challenge: 'ee'.repeat(32), index: '3' })
  assert.equal(JSON.parse(c.sent[0]).type, 'claim')
  assert.equal(JSON.parse(c.sent[0]).signature.length, 130)
  ready(c, { role: 'publisher', addr: admin, index: 3 })
  const soc = s.send('hi')
  assert.equal(soc.index, 3n)
  const frame = c.sent[1]
  assert.equal(frame.length, 8 + 65 + 8 + 2)
  assert.equal(new DataView(frame.buffer).getBigUint64(0), 3n)
  assert.equal(s.send('again').index, 4n)

  // A GSOC publisher: no text frames, ready when open, signature ‖ span ‖ payload under its id.
  const id = 'ee'.repeat(32)
  const g = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic: anchorTopic(id, admin) }, key, id, transport: d.transport })
  const gc = await d.conn()
  assert.equal(gc.url.searchParams.get('gsoc-topic'), id)
  assert.equal(gc.url.searchParams.get('binding'), null)
  gc.h.open()
  await g.ready()
  g.send('gsoc')
  assert.equal(gc.sent[0].length, 65 + 8 + 4)
  assert.throws(() => g.send('x', { id: 'ff'.repeat(32) }), /fixes the id/)

  // Explicit anchor: each frame carries its id.
  const a = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'anchor', admin }, key, transport: d.transport })
  const ac = await d.conn()
  ready(ac, { role: 'publisher', binding: 'anchor' })
  a.send('x', { id: '01'.repeat(32) })
  assert.equal(hex(ac.sent[0].subarray(0, 32)), '01'.repeat(32))
})

test('a browser persists: the batch, the fields and the keep-alive go in the query, as in Node', async () => {
  for (const sendsHeaders of [false, true]) {
    const d = driver(sendsHeaders)
    const s = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'feed', admin }, key, postageBatch: 'aa'.repeat(32), keepAlive: 30, transport: d.transport })
    const c = await d.conn()
    assert.equal(c.url.searchParams.get('swarm-postage-batch-id'), 'aa'.repeat(32))
    assert.equal(c.url.searchParams.get('swarm-keep-alive'), '30')
    assert.equal(c.url.searchParams.get('swarm-soc-fields'), 'address,index,payload')
    assert.deepEqual(c.headers, {})
    const closed = s.close()
    c.h.closed(1000, 'bye')
    await closed
  }
})

test('bad arguments are refused before anything is sent', () => {
  const d = driver()
  const base = { api: 'http://127.0.0.1:1', peer: 'p', transport: d.transport }
  assert.throws(() => new Session({ ...base, cohort: { topic, binding: 'mnemonic', publishers: 'all' } }), /group chat/)
  assert.throws(() => new Session({ ...base, cohort: { topic, binding: 'anchor', closed: true } }), /closed needs an admin/)
  assert.throws(() => new Session({ ...base, cohort: { topic, binding: 'anchor' }, key }), /id: required/)
  assert.throws(() => new Session({ ...base, cohort: { topic, binding: 'feed', admin }, index: 2 ** 53 }), /safe integer/)
  assert.throws(() => new Session({ ...base, cohort: { topic, binding: 'feed', admin }, fields: ['payload', 'index'] }), /payload must come last/)
})

test('a node that refuses the cursor (no storage): the subscriber reconnects live only', async () => {
  const d = driver()
  const s = new Session({ api: 'http://127.0.0.1:1', peer: 'p', cohort: { topic, binding: 'feed', admin }, transport: d.transport, reconnect: { initialDelay: 1, maxDelay: 2 } })
  const c1 = await d.conn()
  assert.equal(c1.url.searchParams.get('index'), null)
  ready(c1)
  c1.h.binary(update(0n))
  c1.h.closed(1001, 'the broker ended the stream')
  const c2 = await d.conn()
  assert.equal(c2.url.searchParams.get('index'), '1')
  c2.h.refused(HttpError.fromBody('open session', 400, '{"message":"invalid query params","reasons":[{"field":"index","error":"this node has no storage"}]}'))
  const c3 = await d.conn()
  assert.equal(c3.url.searchParams.get('index'), null)
  ready(c3)
  assert.equal(s.state, 'ready')
  const closed = s.close()
  c3.h.closed(1000, 'bye')
  await closed
})
