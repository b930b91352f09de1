// tiny-secp256k1's WebAssembly module for the browser bundle
// (scripts/build.mjs): its bytes inline (esbuild's binary loader), compiled
// and instantiated at once when the bundle loads, with the imports
// tiny-secp256k1's own Node loader gives it. Where a page cannot compile
// WebAssembly (a Content Security Policy without 'wasm-unsafe-eval', a
// runtime without it) this module's exports are a stand-in every function
// call of which throws: src/fastsign.ts's self-test then fails, and the
// client signs with @noble/curves, the same bytes.
import bytes from '../../node_modules/tiny-secp256k1/lib/secp256k1.wasm'
import * as rand from '../../node_modules/tiny-secp256k1/lib/rand.browser.js'
import * as validateError from '../../node_modules/tiny-secp256k1/lib/validate_error.js'

function load() {
  try {
    const module = new WebAssembly.Module(bytes)
    return new WebAssembly.Instance(module, { './rand.js': rand, './validate_error.js': validateError }).exports
  } catch {
    // tiny-secp256k1 reads memory.buffer and each input's pointer (value) when it loads
    return new Proxy({}, { get: (_, name) => (name === 'memory' ? { buffer: new ArrayBuffer(0) } : { value: 0 }) })
  }
}

export default load()
