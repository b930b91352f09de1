// The client's signatures are bee's signer's, byte for byte: signWithKey
// (RFC 6979: tiny-secp256k1's WebAssembly in Node, @noble/curves where it is
// not loaded) against vectors made by bee's Go signer
// (signatures.json, kept honest by pkg/wsclient's TestJSSignatureVectors),
// and against bee-js, which recovers the same owner from them.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { PrivateKey, Signature } from '@ethersphere/bee-js'
import { addressOf, signSOC, signWithKey } from '../../dist/esm/index.js'

const hex = (b) => Buffer.from(b).toString('hex')
const unhex = (s) => new Uint8Array(Buffer.from(s, 'hex'))
const vectors = JSON.parse(readFileSync(new URL('./signatures.json', import.meta.url), 'utf8'))

test('signWithKey signs as bee\'s Go signer, byte for byte (32 vectors)', () => {
  assert.equal(vectors.length, 32)
  const vs = new Set()
  for (const v of vectors) {
    const sig = signWithKey(unhex(v.key), unhex(v.data))
    assert.equal(hex(sig), v.signature, `key ${v.key}, data of ${v.data.length / 2} bytes`)
    vs.add(sig[64])
  }
  assert.deepEqual([...vs].sort(), [27, 28], 'the vectors hold both recovery ids')
})

test('a key signs, and its address is derived, as bee-js reads them', () => {
  for (const v of vectors.slice(0, 8)) {
    const key = new PrivateKey(v.key)
    assert.equal(addressOf(key).toHex(), v.address)
    const data = unhex(v.data)
    const sig = new Signature(signWithKey(unhex(v.key), data))
    assert.equal(sig.recoverPublicKey(data).address().toHex(), v.address, 'bee-js recovers the owner')
    assert.ok(sig.isValid(data, v.address))
    // bee-js's own signer picks another nonce: another valid signature of the same digest.
    assert.ok(key.sign(data).isValid(data, v.address))
  }
})

test('signSOC: the SOC\'s owner is the key\'s address, derived once, as bee-js derives it', () => {
  const v = vectors[3]
  const key = new PrivateKey(v.key)
  const id = unhex('11'.repeat(32))
  for (const payload of ['a', 'b']) {
    const soc = signSOC(key, id, new TextEncoder().encode(payload))
    const signed = new Uint8Array([...id, ...soc.wrappedAddress])
    assert.equal(new Signature(soc.signature).recoverPublicKey(signed).address().toHex(), v.address)
  }
})

test('signWithKey refuses a key out of range', () => {
  assert.throws(() => signWithKey(new Uint8Array(32), new Uint8Array(1)))
  assert.throws(() => signWithKey(unhex('ff'.repeat(32)), new Uint8Array(1)))
})

test('chunkAddress is bee-js\'s BMT address, for payloads of every length class', async () => {
  const { chunkAddress } = await import('../../dist/esm/soc.js')
  const { Bee } = await import('@ethersphere/bee-js')
  const bee = new Bee('http://localhost:1633') // holds bee-js's chunk functions; makes no request
  const lengths = new Set()
  for (let n = 1; n <= 130; n++) lengths.add(n)
  for (let k = 5; k <= 128; k++) for (const n of [k * 32 - 1, k * 32, k * 32 + 1]) if (n <= 4096) lengths.add(n)
  let seed = 1
  for (const n of lengths) {
    const payload = Uint8Array.from({ length: n }, () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff)
    const cac = bee.makeContentAddressedChunk(payload)
    assert.equal(hex(chunkAddress(cac.span.toUint8Array(), payload)), cac.address.toHex(), `a payload of ${n} bytes`)
  }
  // A span other than the payload's length (a chunk of a file's tree) is hashed as given.
  const payload = new Uint8Array(64).fill(9)
  const span = unhex('0020000000000000')
  const { Span } = await import('@ethersphere/bee-js')
  assert.equal(hex(chunkAddress(span, payload)), bee.makeContentAddressedChunk(payload, new Span(span)).address.toHex())
  assert.throws(() => chunkAddress(span, new Uint8Array(4097)))
})

test('socAddress is bee-js\'s SOC address', async () => {
  const { socAddress } = await import('../../dist/esm/index.js')
  const { Bee, EthAddress, Identifier } = await import('@ethersphere/bee-js')
  const bee = new Bee('http://localhost:1633')
  for (const v of vectors.slice(0, 4)) {
    const id = unhex(v.key) // any 32 bytes
    assert.equal(hex(socAddress(id, v.address)), bee.calculateSingleOwnerChunkAddress(new Identifier(id), new EthAddress(v.address)).toHex())
  }
})

test('keccak is bee-js\'s keccak256, for one part or several, of every length around the rate', async () => {
  const { keccak } = await import('../../dist/esm/soc.js')
  const { Bytes } = await import('@ethersphere/bee-js')
  let seed = 7
  for (const n of [0, 1, 20, 31, 32, 33, 52, 64, 135, 136, 137, 271, 272, 273, 1000, 4104]) {
    const data = Uint8Array.from({ length: n }, () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff)
    const want = Bytes.keccak256(data).toHex()
    assert.equal(hex(keccak(data)), want, `${n} bytes`)
    const cut = Math.floor(n / 3)
    assert.equal(hex(keccak(data.subarray(0, cut), data.subarray(cut, 2 * cut), data.subarray(2 * cut))), want, `${n} bytes in three parts`)
  }
})

test('hex and toBytes read and write hex as bee-js\'s Bytes', async () => {
  const { hex: toHex, toBytes } = await import('../../dist/esm/bytes.js')
  const { Bytes } = await import('@ethersphere/bee-js')
  const all = Uint8Array.from({ length: 256 }, (_, i) => i)
  assert.equal(toHex(all), new Bytes(all).toHex())
  assert.equal(toHex(new Uint8Array(0)), '')
  assert.deepEqual(toBytes('', undefined, 'x'), new Uint8Array(0)) // bee-js's Bytes refuses '' (falsy)
  assert.throws(() => toBytes('0x', 32, 'x'), /0 bytes, want 32/)
  for (const s of [toHex(all), toHex(all).toUpperCase(), '0x' + toHex(all), '0X00ff']) {
    assert.deepEqual(toBytes(s, undefined, 'x'), new Bytes(s.replace(/^0[xX]/, '')).toUint8Array(), s.slice(0, 10))
  }
  for (const bad of ['0', 'abc', 'zz', '0x0g', ' 00']) assert.throws(() => toBytes(bad, undefined, 'x'), /not hex/, bad)
  assert.throws(() => toBytes('00', 2, 'x'), /1 bytes, want 2/)
})

test('publicKeyAddress is bee-js\'s PublicKey.address, compressed or not', async () => {
  const { publicKeyAddress } = await import('../../dist/esm/soc.js')
  const { PrivateKey } = await import('@ethersphere/bee-js')
  for (const v of vectors.slice(0, 8)) {
    const pub = new PrivateKey(v.key).publicKey()
    assert.equal(publicKeyAddress(pub.toCompressedUint8Array()).toHex(), v.address.replace(/^0x/, '').toLowerCase())
    assert.equal(publicKeyAddress(pub.toUint8Array()).toHex(), pub.address().toHex()) // 64 bytes, x ‖ y
    assert.equal(publicKeyAddress(Uint8Array.of(4, ...pub.toUint8Array())).toHex(), pub.address().toHex())
  }
  assert.throws(() => publicKeyAddress(new Uint8Array(33)))
})

test('the curve without the endomorphism signs as @noble/curves\' secp256k1, byte for byte and recovery bit (500 random keys and digests)', async () => {
  const { curve } = await import('../../dist/esm/soc.js')
  const { secp256k1 } = await import('@noble/curves/secp256k1')
  const { randomBytes } = await import('node:crypto')
  for (let i = 0; i < 500; i++) {
    const key = new Uint8Array(randomBytes(32))
    const digest = new Uint8Array(randomBytes(32))
    const a = curve.sign(digest, key, { lowS: true })
    const b = secp256k1.sign(digest, key, { lowS: true })
    assert.equal(hex(a.toCompactRawBytes()), hex(b.toCompactRawBytes()))
    assert.equal(a.recovery, b.recovery)
    assert.equal(hex(curve.getPublicKey(key, false)), hex(secp256k1.getPublicKey(key, false)))
  }
})

// Why the client signs SOCs itself (issue 25: "bee-js stays the source of
// keys, SOC and BMT"): bee-js's makeSingleOwnerChunk takes no signer of
// ours. It makes a bee-js PrivateKey of whatever it is given — a subclass's
// sign is never called, a Signer object is refused — and signs with bee-js's
// JavaScript secp256k1 (scripts/bench-soc.mjs: 20-120 times this client's
// signSOC). When a bee-js release calls a given signer, this test fails:
// then the client can hand bee-js its signer and drop its own SOC code.
test('bee-js makeSingleOwnerChunk signs with its own PrivateKey, never a signer handed to it', async () => {
  const { signSOC } = await import('../../dist/esm/soc.js')
  const { Bee, PrivateKey } = await import('@ethersphere/bee-js')
  const bee = new Bee('http://localhost:1633')
  const v = vectors[0]
  let calls = 0
  class Fast extends PrivateKey {
    sign(data) {
      calls++
      return super.sign(data)
    }
  }
  const key = new Fast(unhex(v.key))
  const id = new Uint8Array(32).fill(3)
  const payload = new TextEncoder().encode('message 42')
  const soc = bee.makeContentAddressedChunk(payload).toSingleOwnerChunk(id, key)
  assert.equal(calls, 0, "bee-js called the signer it was handed: hand it the client's signer (src/soc.ts)")
  const ours = signSOC(new PrivateKey(unhex(v.key)), id, payload)
  assert.equal(soc.address.toHex(), hex(ours.address)) // the same SOC
  const signer = { address: unhex(v.address), sign: () => new Uint8Array(65) }
  assert.throws(() => bee.makeContentAddressedChunk(payload).toSingleOwnerChunk(id, signer))
})

test('Node signs with the WebAssembly secp256k1, the same bytes as @noble/curves (500 random keys and messages)', async () => {
  const { signWithCurve, signerBackend, ownerOf } = await import('../../dist/esm/soc.js')
  const { randomBytes } = await import('node:crypto')
  const { secp256k1 } = await import('@noble/curves/secp256k1')
  assert.equal(signerBackend, 'wasm')
  const ids = new Set()
  for (let i = 0; i < 500; i++) {
    let key = new Uint8Array(randomBytes(32))
    if (i === 0) key = unhex('00'.repeat(31) + '01') // the smallest key
    if (i === 1) key = unhex((secp256k1.CURVE.n - 1n).toString(16).padStart(64, '0')) // the largest
    const data = new Uint8Array(randomBytes(1 + (i % 97)))
    const sig = signWithKey(key, data)
    assert.equal(hex(sig), hex(signWithCurve(key, data)), `key ${hex(key)}`)
    ids.add(sig[64])
    assert.equal(hex(ownerOf(new PrivateKey(key))), addressOf(new PrivateKey(key)).toHex())
  }
  assert.deepEqual([...ids].sort(), [27, 28])
})

test('the WebAssembly secp256k1 is used only if it signs as @noble/curves does (the self-test)', async () => {
  const { checked } = await import('../../dist/esm/fastsign.js')
  const tiny = await import('tiny-secp256k1')
  assert.ok(checked(tiny), 'tiny-secp256k1 passes')
  assert.equal(checked(undefined), undefined)
  const broken = { signRecoverable: () => { throw new Error('no WebAssembly') }, pointFromScalar: tiny.pointFromScalar }
  assert.equal(checked(broken), undefined, 'a library that throws')
  const otherNonce = { signRecoverable: (h, d) => tiny.signRecoverable(h, d, new Uint8Array(32).fill(1)), pointFromScalar: tiny.pointFromScalar }
  assert.equal(checked(otherNonce), undefined, 'a library that signs with another nonce')
})
