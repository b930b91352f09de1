// Browsers, through another bundler (package.json "browser") and in the
// default browser bundle dist/browser/bps.js: no WebAssembly, whose module
// a bundler would have to be configured to load (tiny-secp256k1 imports its
// .wasm file). The client signs with @noble/curves, the same bytes. The
// opt-in bundle dist/browser/bps.wasm.js replaces this module by one that
// carries the WebAssembly inline (scripts/build.mjs, scripts/browser-wasm).
import type { FastSecp256k1 } from './fastsign.js'

/** The WebAssembly secp256k1 the client signs with: none here. */
export const fastSecp256k1: FastSecp256k1 | undefined = undefined
