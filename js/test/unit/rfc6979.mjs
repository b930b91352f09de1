// A test signer that signs as bee's Go signer does: ECDSA on secp256k1
// over keccak256(EIP-191 prefix ‖ keccak256(data)), the nonce RFC 6979's
// (HMAC-SHA256), s low, v = 27 + the recovery id. Its signatures are the Go
// vectors' bytes, so a chunk the client signs with it equals the Go chunk
// byte for byte: the client asked to sign exactly what Go signs. The
// elliptic-curve arithmetic is bee-js's own (cafe-utility's signHash, given
// the nonce); only the nonce is derived here.
import { createHmac } from 'node:crypto'
import { createRequire } from 'node:module'
import { PrivateKey } from '@ethersphere/bee-js'

const require = createRequire(createRequire(import.meta.url).resolve('@ethersphere/bee-js'))
const { Binary, Elliptic } = require('cafe-utility')

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n
const big = (b) => BigInt('0x' + Buffer.from(b).toString('hex'))
const be32 = (n) => Buffer.from(n.toString(16).padStart(64, '0'), 'hex')
const hmac = (k, ...d) => createHmac('sha256', k).update(Buffer.concat(d.map((x) => Buffer.from(x)))).digest()

/** RFC 6979's nonce for secret x and the 32-byte message hash h (SHA-256 HMAC, qlen 256). */
export function nonce(x, h) {
  const xo = be32(big(x))
  const ho = be32(big(h) % N)
  let K = Buffer.alloc(32, 0)
  let V = Buffer.alloc(32, 1)
  K = hmac(K, V, [0], xo, ho)
  V = hmac(K, V)
  K = hmac(K, V, [1], xo, ho)
  V = hmac(K, V)
  for (;;) {
    V = hmac(K, V)
    const k = big(V)
    if (k >= 1n && k < N) return k
    K = hmac(K, V, [0])
    V = hmac(K, V)
  }
}

const prefix = new TextEncoder().encode('\x19Ethereum Signed Message:\n32')

/** The Signer (the client's interface) of secret key bytes, signing with RFC 6979 nonces. */
export function rfc6979Signer(secret) {
  const key = new PrivateKey(secret)
  return {
    address: key.publicKey().address().toUint8Array(),
    sign(data) {
      const digest = Binary.keccak256(Binary.concatBytes(prefix, Binary.keccak256(data)))
      const [r, s, v] = Elliptic.signHash(big(digest), big(secret), nonce(secret, digest))
      return new Uint8Array([...be32(r), ...be32(s), Number(v)])
    },
  }
}
