// A WebAssembly secp256k1 for the client's own keys: tiny-secp256k1 (the
// bitcoinjs project's build of libsecp256k1, whose ECDSA nonce is RFC
// 6979's as @noble/curves' and bee's Go signer's), 2.5-3 times faster than
// @noble/curves in JavaScript (docs/benchmarks.md). Where it is loaded
// (Node, and the opt-in browser bundle dist/browser/bps.wasm.js, which
// carries the WebAssembly module inline) the client signs with it; where it
// is not (the default browser bundle dist/browser/bps.js, an ESM build
// bundled by another bundler, a page whose Content Security Policy forbids
// WebAssembly) the client signs with @noble/curves, the same bytes.
import { toBytes } from './bytes.js'

const hexBytes = (h: string): Uint8Array => toBytes(h, undefined, 'self-test')

/** What the client uses of a secp256k1 library: tiny-secp256k1's functions of these names. */
export interface Secp256k1Lib {
  signRecoverable(h: Uint8Array, d: Uint8Array): { signature: Uint8Array; recoveryId: number }
  pointFromScalar(d: Uint8Array, compressed?: boolean): Uint8Array | null
}

/** A library that passed the self-test: ECDSA with RFC 6979's nonce, low s; uncompressed public keys. */
export interface FastSecp256k1 {
  /** r ‖ s (low s) and the recovery id of the signature of the 32-byte digest by secret. */
  sign(digest: Uint8Array, secret: Uint8Array): { signature: Uint8Array; recoveryId: number }
  /** The uncompressed public key (0x04 ‖ x ‖ y) of secret. */
  publicKey(secret: Uint8Array): Uint8Array
}

// One signature made with @noble/curves' secp256k1 (RFC 6979, low s): a
// library whose signature of the same digest by the same key is not these
// bytes is not used.
const testKey = '2837668374ec7df38fc1aeb4dc066f2710ae8270d6222c1d141f58f0a636fae6'
const testDigest = 'ddf1cef7ea94c321676897164428a3f91062ac45aa2b132fa73e5806d0b04854'
const testSignature =
  '2a55a4114054fcf6fdbe6b45a06867b387cf7b1c055dca099de4de56c1a48bad5e55fa123879c3954f03ef2f14efca83bce3dc7aa6a76868f1610f1e72a8cd9d'
const testRecovery = 1
const testPublicKey =
  '0435df1d95f4cdb74963cde45140fca271801b55c696c6af2759f39fea227e5d323383283a17a010e17425de77bbd124d146c66167bb57c3a3ac4ba64d2d00ebe8'

/**
 * lib as the client's signer if it works here and signs as @noble/curves
 * does (one known signature and public key); else undefined. A library
 * whose WebAssembly could not be compiled throws on its first call: that is
 * an undefined too.
 */
export function checked(lib: Secp256k1Lib | undefined): FastSecp256k1 | undefined {
  if (!lib) return undefined
  try {
    const s = lib.signRecoverable(hexBytes(testDigest), hexBytes(testKey))
    const p = lib.pointFromScalar(hexBytes(testKey), false)
    if (!p || !same(p, testPublicKey) || !same(s.signature, testSignature) || s.recoveryId !== testRecovery) return undefined
  } catch {
    return undefined
  }
  return {
    sign: (digest, secret) => lib.signRecoverable(digest, secret),
    publicKey: (secret) => {
      const p = lib.pointFromScalar(secret, false)
      if (!p) throw new RangeError('not a secp256k1 private key')
      return p
    },
  }
}

function same(b: Uint8Array, hex: string): boolean {
  const h = hexBytes(hex)
  return b.length === h.length && b.every((x, i) => x === h[i])
}
