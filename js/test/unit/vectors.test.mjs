// The client's bytes against vectors from the node's own Go code (pkg/bps:
// ClaimDigest, FeedUpdate, ServiceUpdate; bee's crypto signer), for the key
// below: what the node verifies is exactly what the client makes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { PrivateKey, Signature } from '@ethersphere/bee-js'
import { answerClaim, claimDigest, claimPreimage, encodeServiceMessage, feedId, parseFrame, serviceBody, serviceId, signSOC, ClaimError } from '../../dist/esm/index.js'

const hex = (b) => Buffer.from(b).toString('hex')
const unhex = (s) => new Uint8Array(Buffer.from(s, 'hex'))
const key = new PrivateKey('4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d')
const addr = '90f8bf6a479f320ead074411a4b0e7944ea8c9c1'
const challenge = hex(Uint8Array.from({ length: 32 }, (_, i) => i))
const broker = hex(Uint8Array.from({ length: 32 }, (_, i) => 0xff - i))
const bigIndex = (1n << 60n) + 12345n // above 2^53: a JSON number would round it
const goDigest = 'af7627170e7183bd892227f7043a0411ee5454029854ac9a2475068d08fb5f85'
const goClaimSig =
  'd1f99d3b6cb05cd11836f8ff1aac6388ed2b2ffb428910edcf632b351ca6697134abd29ff35c6eacc5da23c8d5791b9f4c4fe66ff398824aad83f3008be8254b1b'
const topic = '0a528ed24585e375c843bdbaa82a92ea3320936295ba3eacac9bc93acce2a575' // keccak256("vectors")

test('the key is the vectors\' key', () => {
  assert.equal(key.publicKey().address().toHex(), addr)
})

test('claim digest is bps.ClaimDigest', () => {
  assert.equal(hex(claimDigest(unhex(challenge), unhex(broker), bigIndex)), goDigest)
})

for (const [what, indexJSON] of [
  ['a JSON number above 2^53', bigIndex.toString()],
  ['a decimal string', JSON.stringify(bigIndex.toString())],
]) {
  test(`claim with the index as ${what}: derived locally, signed as bee's signer signs`, () => {
    for (const digest of [undefined, goDigest]) {
      const frame = `{"type":"claim-request","topic":"${topic}","addr":"${addr}","broker":"${broker}","challenge":"${challenge}","index":${indexJSON}${digest ? `,"digest":"${digest}"` : ''}}`
      const { signature, event } = answerClaim(key, parseFrame(frame))
      assert.equal(event.index, bigIndex)
      assert.equal(event.digest, goDigest)
      // The signature bee's Go signer makes (RFC 6979), byte for byte; it
      // recovers to addr over the digest, as the node checks.
      const preimage = claimPreimage(unhex(challenge), unhex(broker), bigIndex)
      assert.equal(signature, goClaimSig)
      assert.ok(new Signature(signature).isValid(preimage, addr), 'the client\'s claim recovers to addr')
    }
  })
}

test('claim: a digest from the node that its fields do not make is not signed', () => {
  const f = parseFrame(`{"type":"claim-request","addr":"${addr}","broker":"${broker}","challenge":"${challenge}","index":1,"digest":"${goDigest}"}`)
  assert.throws(() => answerClaim(key, f), ClaimError)
})

test('claim: a request for another address is not signed', () => {
  const f = parseFrame(`{"type":"claim-request","addr":"${'11'.repeat(20)}","broker":"${broker}","challenge":"${challenge}","index":0}`)
  assert.throws(() => answerClaim(key, f), /not for this session's key/)
})

test('claim: a malformed request is refused', () => {
  const f = parseFrame(`{"type":"claim-request","addr":"${addr}","broker":"00","challenge":"${challenge}","index":0}`)
  assert.throws(() => answerClaim(key, f), ClaimError)
})

test('feed update: bee feed id and the signed SOC are bps.FeedUpdate\'s', () => {
  const id = feedId(unhex(topic), 7n)
  assert.equal(hex(id), 'd7d967d0cf4214acd120f9a10dd4c33ffb5af4e70087ce62af0763b9888d9507')
  const soc = signSOC(key, id, new TextEncoder().encode('hello'))
  const goSig = '0e76cc5efc0a18ef7476b3d2c9beed91bd5cb3b8c98f39c6617c5ce4168d12a87a48dedee25e4d1ba0b9ce96d3cb855394fe454361c6874e87bb4ec5939227f81b'
  assert.equal(hex(soc.span) + hex(soc.payload), '050000000000000068656c6c6f')
  assert.equal(hex(soc.address), '97af532d684f1ec268d7aa0cba5aecddeabed57de76b63887b4722a7c3dc121c')
  // A SOC signature is over keccak256(id ‖ wrapped address): Go's, byte for byte, recovering to addr.
  assert.equal(hex(soc.signature), goSig)
  const signed = new Uint8Array([...id, ...soc.wrappedAddress])
  assert.ok(new Signature(soc.signature).isValid(signed, addr))
})

test('service SOC: payload and body are bps.ServiceUpdate\'s', () => {
  const m = { kind: 'ROSTER', index: 300n, publishers: [addr] }
  assert.equal(hex(encodeServiceMessage(m)), '080110ac021a1490f8bf6a479f320ead074411a4b0e7944ea8c9c1')
  const body = hex(serviceBody(key, unhex(topic), m))
  // id(32) ‖ signature(65) ‖ span(8) ‖ payload, the id bps.ServiceID's
  const goBody = 'b700f0c77883f4682d840fb12f759daf5ad4df40c1703eb5d89242d8604b25e6f9b3c2802c39b67ead297a383a5025dedf3cb171a03884480b42ca38be4430ed607ff621fe51993f921aa026b62c873ab02f1dfdc4d9646c464c7c533c39f09b1c1b00000000000000080110ac021a1490f8bf6a479f320ead074411a4b0e7944ea8c9c1'
  assert.equal(body, goBody, 'the whole body, the signature included: bee\'s Go signer\'s bytes')
  assert.equal(hex(serviceId(unhex(topic), 300n)), goBody.slice(0, 64))
  assert.equal(hex(encodeServiceMessage({ kind: 'END_OF_STREAM', index: 0n })), '0802')
  assert.throws(() => encodeServiceMessage({ kind: 'END_OF_STREAM', index: 1n, publishers: [addr] }), /no publishers/)
  assert.throws(() => encodeServiceMessage({ kind: 'ROSTER', index: 1n, publishers: ['12'] }), /20/)
})
