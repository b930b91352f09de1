// The signer, in a Web Worker: it makes the key, keeps it (the page never
// sees it) and signs what the page's session asks it to, off the page's
// main thread. A module worker; it loads the client's browser bundle
// (bps.js, served beside this file: a worker has no import map) for
// addressOf and signWithKey, the client's own signature (bee's signer's
// bytes).
//
// Messages: { id, op: 'init' } → { id, address } (hex); { id, op: 'sign',
// data } → { id, signature } (65 bytes); a failure → { id, error }.
import { addressOf, signWithKey } from './bps.js'

let secret
self.onmessage = (e) => {
  const { id, op, data } = e.data
  try {
    if (op === 'init') {
      secret ??= crypto.getRandomValues(new Uint8Array(32))
      self.postMessage({ id, address: addressOf(secret).toHex() })
    } else if (op === 'sign') {
      if (!secret) throw new Error('init first')
      const signature = signWithKey(secret, data)
      self.postMessage({ id, signature }, [signature.buffer])
    } else throw new Error(`unknown op ${op}`)
  } catch (err) {
    self.postMessage({ id, error: String(err?.message ?? err) })
  }
}
