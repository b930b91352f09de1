// Keys, keccak256, feed indices and signature recovery are bee-js's. The
// signature is @noble/curves' secp256k1 (RFC 6979 nonces: bee's Go
// signer's bytes, in well under a millisecond, where bee-js's JavaScript
// secp256k1 takes 12-25 ms), on a curve instance without the GLV
// endomorphism (see `curve`). The wrapped chunk's BMT address (hashing only
// the segments that hold payload) and the SOC address are made here from
// bee-js's keccak256; the unit tests compare both with bee-js's own. bee-js's
// Bee, which holds its chunk functions as methods, is not used: a page's
// bundle would carry Bee's whole HTTP API with it (75 KiB minified); and
// bee-js 12's makeSingleOwnerChunk takes no signer of ours (it signs with a
// bee-js PrivateKey made of what it is handed: 20-120 times this SOC's
// time, scripts/bench-soc.mjs), nor does its BMT skip the padding (0.5-1.2
// ms more for a short update).
import { Bytes, EthAddress, FeedIndex, PrivateKey, PublicKey, Signature, Span } from '@ethersphere/bee-js'
import { weierstrass } from '@noble/curves/abstract/weierstrass'
import { secp256k1 } from '@noble/curves/secp256k1'
import { sha256 } from '@noble/hashes/sha2'
import { BytesLike, concat, toBytes, utf8 } from './bytes.js'
import { ValidationError } from './errors.js'
import { randomBytes } from './platform.js'
import { fastSecp256k1 } from './wasmsign.js'

/**
 * What signs for a session: any object that signs as signWithKey (bee's
 * signer, bee-js's PrivateKey.sign) does — EIP-191 over keccak256(data),
 * 65 bytes r ‖ s ‖ v — as the Ethereum address it names: a wallet's
 * session key, or a Web Worker holding the key off the page's main thread
 * (sign may then resolve later). A bee-js PrivateKey or 32 key bytes are
 * signers too.
 */
export interface Signer {
  /** The Ethereum address it signs as: 20 bytes, or hex. */
  address: BytesLike
  /** Signs data as signWithKey does; 65 bytes r ‖ s ‖ v, or a promise of them. */
  sign(data: Uint8Array): Uint8Array | Promise<Uint8Array>
}

/** A signer as the client holds it: the address as bytes. */
export interface HeldSigner {
  address: Uint8Array
  sign(data: Uint8Array): Uint8Array | Promise<Uint8Array>
}

/** Whether key is a Signer object rather than a key. */
export function isSigner(key: unknown): key is Signer {
  return typeof key === 'object' && key !== null && !(key instanceof PrivateKey) && !(key instanceof Uint8Array) && typeof (key as Signer).sign === 'function' && 'address' in key
}

/** Holds a key or a signer: a key's address is derived once, and it signs with signWithKey. */
export function toSigner(key: PrivateKey | BytesLike | Signer): HeldSigner {
  if (isSigner(key)) {
    const s = key
    return { address: toBytes(s.address, 20, 'signer.address'), sign: (d) => s.sign(d) }
  }
  const k = toKey(key)
  const secret = k.toUint8Array()
  return { address: ownerOf(k), sign: (d) => signWithKey(secret, d) }
}

/**
 * secp256k1 as @noble/curves defines it, less its GLV endomorphism, which
 * the library uses for every point multiplication: for the generator, whose
 * multiples it precomputes (8-bit windows), the endomorphism's split of a
 * nonce k into two halves walks the precomputed windows twice, each with
 * its constant-time decoy additions — k·G costs twice the additions of the
 * plain walk. Without it a signature takes 15-25 % less CPU (k·G is most of
 * a signature); the signatures are the same bytes (RFC 6979 fixes them:
 * the unit tests compare them with bee's vectors and with @noble's own
 * secp256k1), and the walk is the library's own constant-time one.
 */
const { endo: _endo, ...params } = secp256k1.CURVE
export const curve = weierstrass({ ...params, hash: sha256 })

/** EIP-191's prefix of a 32-byte message, as bee's signer and bee-js's PrivateKey.sign put it. */
const eip191 = utf8('\x19Ethereum Signed Message:\n32')

/**
 * Signs data as bee's signer (and bee-js's PrivateKey.sign) does: ECDSA on
 * secp256k1 over keccak256(EIP-191 prefix ‖ keccak256(data)), 65 bytes
 * r ‖ s ‖ v with s low and v = 27 + the recovery id. The nonce is RFC 6979's,
 * as bee's Go signer's (btcec): the same bytes as the node signs for the
 * same key and data. With tiny-secp256k1's WebAssembly libsecp256k1 where
 * it is loaded (src/wasmsign.ts: Node and the opt-in browser bundle), else with
 * @noble/curves (signerBackend says which). bee-js's own signer derives its nonce
 * otherwise (another valid signature of the same digest, which recovers to
 * the same owner) and is 20-40 times slower.
 */
export function signWithKey(secret: Uint8Array, data: Uint8Array): Uint8Array {
  if (!fastSecp256k1) return signWithCurve(secret, data)
  const sig = fastSecp256k1.sign(keccak(eip191, keccak(data)), secret)
  return rsv(sig.signature, sig.recoveryId)
}

/**
 * Which secp256k1 signWithKey signs with here: 'wasm' (tiny-secp256k1's
 * libsecp256k1: Node, the opt-in browser bundle bps.wasm.js) or 'js'
 * (@noble/curves: the default browser bundle, another bundler's build, a
 * page that forbids WebAssembly). Both make the same bytes (RFC 6979);
 * 'wasm' in a third of the time.
 */
export const signerBackend: 'wasm' | 'js' = fastSecp256k1 ? 'wasm' : 'js'

/** signWithKey with @noble/curves, whichever is loaded: what the tests compare the WebAssembly's signatures with. */
export function signWithCurve(secret: Uint8Array, data: Uint8Array): Uint8Array {
  const sig = curve.sign(keccak(eip191, keccak(data)), secret, { lowS: true })
  return rsv(sig.toCompactRawBytes(), sig.recovery)
}

/** bee's 65-byte signature: r ‖ s (64 bytes) ‖ v = 27 + the recovery id. */
function rsv(rs: Uint8Array, recovery: number): Uint8Array {
  const out = new Uint8Array(65)
  out.set(rs)
  out[64] = 27 + recovery
  return out
}

/** A key as bee-js's PrivateKey (32 bytes, or hex). */
export function toKey(key: PrivateKey | BytesLike): PrivateKey {
  if (key instanceof PrivateKey) return key
  return new PrivateKey(toBytes(key, 32, 'key'))
}

/** The Ethereum address of key. */
export function addressOf(key: PrivateKey | BytesLike): EthAddress {
  return toKey(key).publicKey().address()
}

/** A signed single-owner chunk, as this client frames it. */
export interface SignedSOC {
  /** The SOC's address: keccak256(id ‖ owner). */
  address: Uint8Array
  identifier: Uint8Array
  signature: Uint8Array
  /** The wrapped chunk's span, 8 bytes little-endian. */
  span: Uint8Array
  payload: Uint8Array
  /** The wrapped content-addressed chunk's address (bee's BMT). */
  wrappedAddress: Uint8Array
}

/**
 * The Ethereum address of each key this client signs with, derived once:
 * a SOC needs the owner's address for its own address. Weak: a key no
 * longer used is forgotten with it.
 */
const owners = new WeakMap<PrivateKey, Uint8Array>()

/**
 * The key's Ethereum address, derived once per key: keccak256 of the
 * uncompressed public key (@noble/curves' point, without its 0x04 prefix),
 * its last 20 bytes — bee-js's PublicKey.address, without bee-js's
 * JavaScript point multiplication.
 */
export function ownerOf(key: PrivateKey): Uint8Array {
  let a = owners.get(key)
  if (!a) {
    const secret = key.toUint8Array()
    const pub = fastSecp256k1 ? fastSecp256k1.publicKey(secret) : curve.getPublicKey(secret, false)
    a = keccak(pub.subarray(1)).slice(12)
    owners.set(key, a)
  }
  return a
}

/**
 * Wraps payload in a content-addressed chunk and signs it as the SOC (id,
 * key): the chunk's BMT address (chunkAddress), one signature (signWithKey) over
 * id ‖ that address (the SOC digest bee checks), and the SOC address
 * keccak256(id ‖ owner) with the owner's address derived once per key —
 * where bee-js's toSingleOwnerChunk derives the public key twice a chunk.
 */
export function signSOC(key: PrivateKey, id: Uint8Array, payload: Uint8Array): SignedSOC {
  return signSOCWith(toSigner(key), id, payload) as SignedSOC
}

/**
 * signSOC with any signer: the SignedSOC at once if the signer answers at
 * once, else a promise of it (a Web Worker's).
 */
export function signSOCWith(signer: HeldSigner, id: Uint8Array, payload: Uint8Array): SignedSOC | Promise<SignedSOC> {
  if (payload.length < 1 || payload.length > 4096) {
    throw new ValidationError(`payload of ${payload.length} bytes: a chunk holds 1 to 4096`)
  }
  const span = Span.fromBigInt(BigInt(payload.length)).toUint8Array()
  const wrappedAddress = chunkAddress(span, payload)
  const make = (signature: Uint8Array): SignedSOC => {
    if (signature.length !== 65) throw new ValidationError(`signer: a signature is 65 bytes, got ${signature.length}`)
    return {
      address: keccak(id, signer.address),
      identifier: id.slice(),
      signature,
      span,
      payload: payload.slice(),
      wrappedAddress,
    }
  }
  const sig = signer.sign(concat(id, wrappedAddress))
  return sig instanceof Uint8Array ? make(sig) : Promise.resolve(sig).then((s) => make(new Uint8Array(s)))
}

/** The SOC address keccak256(id ‖ owner) (bee-js's calculateSingleOwnerChunkAddress, which the unit tests compare it with). */
export function socAddress(id: BytesLike, owner: BytesLike): Uint8Array {
  return keccak(toBytes(id, 32, 'id'), toBytes(owner, 20, 'owner'))
}

/**
 * The address of the content-addressed chunk span ‖ payload: keccak256(span
 * ‖ BMT root), the BMT root over the payload zero-padded to 4096 bytes (128
 * segments of 32, pairs hashed with keccak256 up to one). A subtree of
 * padding alone has the same hash at every place of its level, so it is
 * hashed once (zeroHash) and only the segments that hold payload are: 8
 * hashes for a payload of up to 32 bytes, where bee-js's
 * makeContentAddressedChunk hashes all 128 (1-1.5 ms a chunk). The unit tests
 * compare it with bee-js's for payloads of every length.
 */
export function chunkAddress(span: Uint8Array, payload: Uint8Array): Uint8Array {
  if (payload.length > 4096) throw new ValidationError(`payload of ${payload.length} bytes: a chunk holds at most 4096`)
  let level: Uint8Array[] = []
  for (let i = 0; i < Math.max(1, Math.ceil(payload.length / 32)); i++) {
    const seg = new Uint8Array(32)
    seg.set(payload.subarray(i * 32, i * 32 + 32))
    level.push(seg)
  }
  for (let depth = 0; depth < 7; depth++) {
    const up: Uint8Array[] = []
    for (let i = 0; i < level.length; i += 2) up.push(keccak(level[i], level[i + 1] ?? zeroHash(depth)))
    level = up
  }
  return keccak(span, level[0])
}

/** The BMT hash of a subtree of zeros, by its depth (0: a segment of 32 zero bytes). */
const zeroHashes: Uint8Array[] = [new Uint8Array(32)]

function zeroHash(depth: number): Uint8Array {
  while (zeroHashes.length <= depth) {
    const z = zeroHashes[zeroHashes.length - 1]
    zeroHashes.push(keccak(z, z))
  }
  return zeroHashes[depth]
}

/** keccak256 of the parts, concatenated. */
export function keccak(...parts: Uint8Array[]): Uint8Array {
  return Bytes.keccak256(concat(...parts)).toUint8Array()
}

/** bee's feed id of update index of a feed on topic: keccak256(topic ‖ uint64BE(index)). */
export function feedId(topic: Uint8Array, index: bigint): Uint8Array {
  return keccak(topic, FeedIndex.fromBigInt(index).toUint8Array())
}

/**
 * The owner of a SOC, recovered from its signature over keccak256(id ‖
 * wrappedAddress), with bee-js.
 */
export function recoverOwner(identifier: Uint8Array, signature: Uint8Array, wrappedAddress: Uint8Array): EthAddress {
  return new Signature(signature).recoverPublicKey(concat(identifier, wrappedAddress)).address()
}

/**
 * The address of a compressed (33-byte) or uncompressed (65, or 64 without
 * the 0x04 prefix) public key: bee-js's PublicKey.address, with
 * @noble/curves' point decompression (a subscriber of an implicit-authorship
 * cohort does it for every message).
 */
export function publicKeyAddress(pub: Uint8Array): EthAddress {
  const point = curve.Point.fromHex(pub.length === 64 ? concat(Uint8Array.of(4), pub) : pub) // 64: bee-js's x ‖ y
  return new EthAddress(keccak(point.toRawBytes(false).subarray(1)).slice(12))
}

export { utf8 }

/** SWIP-60's PoMin: under the implicit OWNER and SOC_ID bindings a message's SOC address shares this many leading bits with the topic. */
export const PO_MIN = 16

/** How many leading bits a and b share. */
export function proximity(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i] ^ b[i]
    if (x !== 0) return i * 8 + Math.clz32(x) - 24
  }
  return Math.min(a.length, b.length) * 8
}

/**
 * A SOC id whose address keccak256(id ‖ owner) shares PO_MIN leading bits
 * with topic: what every message of the implicit OWNER binding needs
 * (SWIP-60). About 2^16 hashes: a second or two in JavaScript.
 */
export function mineOwnerId(topic: Uint8Array, owner: Uint8Array, maxTries = 1 << 22): Uint8Array {
  const id = randomBytes(32)
  const view = new DataView(id.buffer)
  const buf = new Uint8Array(52)
  buf.set(owner, 32)
  for (let n = 0; n < maxTries; n++) {
    view.setUint32(28, n)
    buf.set(id, 0)
    if (proximity(keccak(buf), topic) >= PO_MIN) return id
  }
  throw new ValidationError(`no SOC id within ${PO_MIN} bits of the topic in ${maxTries} tries`)
}
