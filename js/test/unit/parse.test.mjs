import assert from 'node:assert/strict'
import { test } from 'node:test'
import { CloseError, decodeMessage, HttpError, parseFrame, topicBytes, ValidationError } from '../../dist/esm/index.js'

const hex = (b) => Buffer.from(b).toString('hex')

test('text frames: indices exact as numbers or decimal strings; strings untouched', () => {
  const f = parseFrame('{"type":"recovered","addr":"ab","from":18446744073709551615,"to": "18446744073709551614"}')
  assert.equal(f.from, '18446744073709551615')
  assert.equal(f.to, '18446744073709551614')
  const e = parseFrame('{"type":"error","reason":"a \\"index\\":12345678901234567890 inside"}')
  assert.equal(e.reason, 'a "index":12345678901234567890 inside')
  const s = parseFrame('{"type":"service","kind":"ROSTER","index":3,"publishers":[],"gap":false}')
  assert.equal(s.index, '3')
  assert.throws(() => parseFrame('[1]'), SyntaxError)
})

test('topics: the node\'s rule', () => {
  const addr = 'ab'.repeat(32)
  assert.equal(hex(topicBytes(addr)), addr)
  assert.equal(hex(topicBytes('0x' + addr)), addr)
  // a name is keccak256 of its bytes: keccak256("demo")
  assert.equal(hex(topicBytes('demo')), hex(topicBytes('demo')))
  assert.notEqual(hex(topicBytes('Cafe')), hex(topicBytes('cafe')))
  assert.equal(topicBytes('cafe').length, 32)
  assert.throws(() => topicBytes('0x' + 'ab'.repeat(31)), /0x-prefixed/)
  assert.throws(() => topicBytes('a'.repeat(40)), /looks like a hex address but is 40/)
  assert.equal(topicBytes('a'.repeat(39)).length, 32) // a name
  assert.throws(() => topicBytes(new Uint8Array(31)), ValidationError)
})

test('binary frames decode by fields, in order, payload the rest', () => {
  const b = new Uint8Array(32 + 8 + 3)
  b.fill(7, 0, 32)
  b[39] = 9 // index 9, big-endian
  b.set([1, 2, 3], 40)
  const m = decodeMessage(b, ['address', 'index', 'payload'])
  assert.equal(hex(m.address), '07'.repeat(32))
  assert.equal(m.index, 9n)
  assert.deepEqual([...m.payload], [1, 2, 3])
  const short = decodeMessage(new Uint8Array(10), ['address', 'payload'])
  assert.equal(short.address, undefined)
})

test('HTTP errors carry the node\'s message, reasons, Retry-After and a hint', () => {
  const e = HttpError.fromBody('open session', 400, '{"code":400,"message":"invalid query params","reasons":[{"field":"closed","error":"closed cohort: only publishers attend; give addr"}]}')
  assert.equal(e.status, 400)
  assert.deepEqual(e.reasons, [{ field: 'closed', error: 'closed cohort: only publishers attend; give addr' }])
  assert.match(e.message, /closed: closed cohort/)
  assert.equal(e.retryable, false)
  assert.equal(HttpError.fromBody('open session', 429, '{"message":"client cohort limit"}').retryable, false)
  const busy = HttpError.fromBody('open session', 503, '{"message":"the broker is full"}', '7')
  assert.equal(busy.retryAfter, 7)
  assert.ok(busy.retryable)
  const batch = HttpError.fromBody('open session', 402, '{"message":"batch exhausted","reasons":[{"field":"swarm-postage-batch-id","error":"exhausted"}]}')
  assert.match(batch.hint, /exhausted: buy a new one/)
  assert.equal(HttpError.fromBody('post service', 500, 'plain text').nodeMessage, 'plain text')
})

test('close errors: code, reason, the error frame\'s reason; what may be retried', () => {
  const eos = new CloseError(1000, 'end of stream: the admin ended the cohort')
  assert.ok(eos.endOfStream)
  assert.equal(eos.retryable, false)
  assert.ok(new CloseError(1011, 'stream reset').retryable)
  assert.ok(new CloseError(1013, 'full').retryable)
  assert.ok(new CloseError(1006, '').retryable)
  assert.equal(new CloseError(1011, 'persist: …', 'persist: 402 batch exhausted').retryable, false)
  const slow = new CloseError(1008, 'slow consumer: 64 frames queued, not read')
  assert.ok(slow.retryable)
  assert.match(slow.hint, /faster/)
  const bad = new CloseError(1008, 'not a publisher now: …', 'not a publisher now: revoked by roster 2')
  assert.equal(bad.retryable, false)
  assert.equal(bad.nodeReason, 'not a publisher now: revoked by roster 2')
  assert.equal(new CloseError(1007, 'invalid').retryable, false)
})
