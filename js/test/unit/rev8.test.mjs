// The client's Rev 8 bytes against the node's own Go vectors: the
// session-feed ids of pkg/bps/sessionfeed's tests (sessionfeed_test.go), and
// the chunks pkg/bps builds with bee's signer (jsvectors_test.go:
// Spec.Chunk, StorageUpdate, RosterPayload), byte for byte. Key 0x0102…20,
// topic 0x00…1f, challenge 0x20…3f, as there.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { PrivateKey, Signature } from '@ethersphere/bee-js'
import {
  channelId,
  encodeRoster,
  feedId,
  FeedCursor,
  FeedCursors,
  inboundFrame,
  Kind,
  kindId,
  kindPrefix,
  MAX_INDEX,
  serviceChunkWith,
  serviceRequest,
  sessionId,
  sessionTopic,
  signChunk,
  SignError,
  signSOC,
  signWithKey,
  socData,
} from '../../dist/esm/index.js'
import { toSigner } from '../../dist/esm/soc.js'
import { big, go, vectors } from './govectors.mjs'

const hex = (b) => Buffer.from(b).toString('hex')
const unhex = (s) => new Uint8Array(Buffer.from(s, 'hex'))
const seq = (b) => Uint8Array.from({ length: 32 }, (_, i) => b + i)
const padded = (s) => {
  const out = new Uint8Array(32)
  out.set(new TextEncoder().encode(s))
  return out
}
const topic = seq(0x00)
const challenge = seq(0x20)
const owner = '6370ef2f4db3611d657b90667de398a2cc2a370c'
const utf8 = (s) => new TextEncoder().encode(s)
const secret = seq(0x01)
/**
 * A signer object (a Web Worker's, a wallet's) holding the vectors' key and
 * signing with the client's own signWithKey: one signature function, bee's
 * Go signer's bytes (RFC 6979; signatures.test.mjs checks it against bee's).
 */
const signer = { address: unhex(owner), sign: (d) => signWithKey(secret, d) }

const pubs = ['11'.repeat(20), '22'.repeat(20)]

/** The chunks the Go vectors pin, as the client signs them with signer. */
function chunks(signer) {
  return {
    auth: signChunk(signer, kindId(Kind.AUTH, topic, challenge, 0n), new Uint8Array(0)),
    data: signChunk(signer, kindId(Kind.DATA, topic, challenge, 5n), utf8('bps rev 8')),
    roster: serviceChunkWith(signer, topic, challenge, { kind: 'ROSTER', index: 1n, publishers: pubs }),
    eos: serviceChunkWith(signer, topic, challenge, { kind: 'EOS', index: 0n }),
    implicit: signChunk(signer, channelId(topic, 7n), utf8('implicit')),
    storage: signChunk(signer, channelId(topic, 5n), utf8('bps rev 8')),
  }
}

test('session-feed ids are pkg/bps/sessionfeed\'s vectors, every kind', () => {
  assert.equal(hex(kindPrefix(Kind.DATA)), '')
  for (const [kind, topicS, ids] of vectors) {
    assert.equal(hex(sessionTopic(kindPrefix(kind), topic, challenge)), topicS, `kind ${kind} topic_s`)
    for (const index of [0n, 1n, big]) {
      assert.equal(hex(kindId(kind, topic, challenge, index)), ids[index], `kind ${kind} index ${index}`)
      assert.equal(hex(sessionId(unhex(topicS), index)), ids[index])
    }
  }
  assert.equal(hex(kindPrefix(Kind.AUTH)), hex(utf8('bps-service:v1')) + '02')
  assert.throws(() => kindPrefix(0), /no session feed/)
  assert.throws(() => sessionTopic(new Uint8Array(0), topic.subarray(1), challenge), /topic: 31 bytes/)
  assert.throws(() => kindId(Kind.DATA, topic, challenge.subarray(0, 16), 0n), /challenge: 16 bytes/)
})

test('upstream\'s fixture ids and the channel id are sessionfeed\'s', () => {
  // TestUpstreamFixture: "bps-test-topic", "bps-test-challenge", zero-padded
  const t = padded('bps-test-topic')
  const c = padded('bps-test-challenge')
  assert.equal(hex(sessionTopic(kindPrefix(Kind.DATA), t, c)), '0f87fdc2337db43fcb44c445ddba662f4c784a9c972e48c2cb163571a9fd3732')
  assert.equal(hex(kindId(Kind.DATA, t, c, 0n)), '304725343136a8e3202c3345bbd2bceac8b631a0eb9a0ceb1373309d981cdbfa')
  assert.equal(hex(kindId(Kind.DATA, t, c, 3n)), '86450b8f0c4c8b2db75cee9e282d0ded844859a50fed651872cbe1a49f2a4476')
  assert.equal(hex(sessionTopic(kindPrefix(Kind.AUTH), t, c)), '50b9ea93487be9e432b27c98fd337ba1e4e4820034b2ed1e78398c6cc4d1d1f9')
  assert.equal(hex(kindId(Kind.AUTH, t, c, 0n)), '590e662098489bbe07cb3ad03ff853c82aca6bbe5041f36f730efe97df8baf28')
  assert.equal(hex(kindId(Kind.AUTH, t, c, 3n)), 'dfd624cda5018b55aa1d3ae811df569edb14df4a0b14acd66c43f29a54113df7')
  // TestChannelID
  assert.equal(hex(channelId(topic, 7n)), '8e34231d958e6886dced5ef6150a0697d5e10719b23ebc7e656cf5dd57507dda')
  assert.equal(hex(channelId(topic, 7n)), hex(feedId(topic, 7n)))
  assert.notEqual(hex(kindId(Kind.DATA, topic, challenge, 7n)), hex(channelId(topic, 7n)))
})

test('the roster payload is pkg/bps\'s RosterPayload', () => {
  assert.equal(hex(encodeRoster(pubs)), '0a14' + pubs[0] + '0a14' + pubs[1])
  assert.equal(encodeRoster([]).length, 0)
  assert.throws(() => encodeRoster(['12']), /20/)
  assert.throws(() => encodeRoster(Array(187).fill(pubs[0])), /186/)
})

test('AUTH, DATA, ROSTER, EOS, implicit feed and storage chunks equal the Go vectors byte for byte (signWithKey, as bee\'s signer)', async () => {
  const got = chunks(signer)
  for (const [name, want] of Object.entries(go)) {
    assert.equal(hex(socData(await got[name])), want, name)
  }
  // An AUTH is the empty chunk: 105 bytes.
  assert.equal(socData(got.auth).length, 105)
})

test('the same chunks signed with the key itself: the same bytes, the signature included, recovering to the owner', async () => {
  // The key's own signer is signWithKey (@noble/curves, RFC 6979): bee's
  // Go signer's bytes, so a chunk signed with the key equals the Go chunk.
  const key = new PrivateKey(secret)
  const held = toSigner(key)
  assert.equal(hex(held.address), owner)
  const got = chunks(held)
  for (const [name, want] of Object.entries(go)) {
    assert.ok(!(got[name] instanceof Promise), `${name}: the key signs at once`)
    const soc = got[name]
    assert.equal(hex(socData(soc)), want, name)
    assert.ok(new Signature(soc.signature).isValid(new Uint8Array([...soc.identifier, ...soc.wrappedAddress]), owner), name)
  }
  // signSOC (the key's) is signChunk for a payload, byte for byte
  const s = signSOC(key, kindId(Kind.DATA, topic, challenge, 5n), utf8('bps rev 8'))
  assert.equal(hex(socData(s)), go.data)
})

test('inbound frames: kind ‖ index ‖ soc, and a persistent DATA\'s storage signature before the soc', () => {
  const { data, storage, auth } = chunks(signer)
  assert.equal(hex(inboundFrame(Kind.DATA, 5n, data)), '01' + '0000000000000005' + go.data)
  assert.equal(hex(inboundFrame(Kind.AUTH, 0n, auth)), '02' + '0000000000000000' + go.auth)
  assert.equal(hex(inboundFrame(Kind.DATA, 5n, data, storage.signature)), '01' + '0000000000000005' + go.storage.slice(64, 194) + go.data)
})

test('the service request: kind, index exact, challenge and the signed chunk', async () => {
  const soc = await serviceChunkWith(signer, topic, challenge, { kind: 'ROSTER', index: 1n, publishers: pubs })
  const body = JSON.parse(serviceRequest({ kind: 'ROSTER', index: 1n, publishers: pubs }, challenge, soc))
  assert.deepEqual(body, { kind: 'ROSTER', index: 1, challenge: hex(challenge), soc: go.roster })
  const huge = serviceRequest({ kind: 'ROSTER', index: (1n << 60n) + 1n }, challenge, soc)
  assert.match(huge, /"index":1152921504606846977,/, 'the index written exactly')
  assert.throws(() => serviceChunkWith(signer, topic, challenge, { kind: 'EOS', index: 1n }), /index 0 only/)
  assert.throws(() => serviceChunkWith(signer, topic, challenge, { kind: 'EOS', index: 0n, publishers: pubs }), /no publishers/)
  assert.throws(() => serviceChunkWith(signer, topic, challenge, { kind: 'END_OF_STREAM', index: 0n }), /ROSTER or EOS/)
})

test('a feed cursor signs DATA only in [cursor, cursor + 1024), and below it only the payload it signed there', () => {
  const c = new FeedCursor(10n)
  const a = utf8('a')
  assert.throws(() => c.take(9n, a), SignError, 'below the cursor, never signed here')
  assert.throws(() => c.take(10n + 1024n, a), /1024 past/)
  c.take(10n, a)
  assert.equal(c.next, 11n)
  c.take(10n, a) // the same payload again: a re-signature
  c.release(10n, 11n) // not undone: a re-signature
  assert.equal(c.next, 11n)
  assert.throws(() => c.take(10n, utf8('b')), /another payload/)
  c.take(11n + 1023n, a) // the far end of the window
  assert.equal(c.next, 1035n)
  assert.throws(() => c.take(MAX_INDEX + 1n, a), /past the last index/)
  // A node cannot make the client sign the last index: 2^64-2 is far from any cursor it starts from.
  assert.throws(() => new FeedCursor(0n).take(MAX_INDEX, a), /past this key's feed cursor/)
  // raise: forward only
  c.raise(5n)
  assert.equal(c.next, 1035n)
  c.raise(2000n)
  assert.equal(c.next, 2000n)
  // The held payloads are the latest 1,024.
  const h = new FeedCursor()
  for (let i = 0n; i < 1030n; i++) h.take(i, a)
  assert.equal(h.payload(5n), undefined)
  assert.deepEqual(h.payload(6n), a)
  assert.throws(() => h.take(5n, a), /not held/)
  // Shared per (owner, topic), bounded.
  const cs = new FeedCursors(2)
  const o1 = new Uint8Array(20).fill(1)
  assert.equal(cs.get(o1, topic), cs.get(o1, topic))
  assert.equal(cs.get(o1, topic, 7n).next, 7n)
  assert.notEqual(cs.get(o1, challenge), cs.get(o1, topic))
  const first = cs.get(o1, topic)
  cs.get(o1, seq(0x40))
  cs.get(o1, seq(0x60))
  assert.notEqual(cs.get(o1, topic), first, 'the least recently used forgotten')
})

test('a take whose frame was never sent is given back, and only then', () => {
  const c = new FeedCursor(3n)
  const before = c.take(3n, utf8('a'))
  assert.equal(before, 3n)
  c.release(3n, before)
  assert.equal(c.next, 3n)
  c.take(3n, utf8('b')) // free again: never sent
  const b2 = c.take(4n, utf8('c'))
  c.take(5n, utf8('d'))
  c.release(4n, b2) // another was taken since: kept
  assert.equal(c.next, 6n)
  assert.throws(() => c.take(4n, utf8('x')), /another payload/)
})
