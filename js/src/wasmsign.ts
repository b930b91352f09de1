// Node: tiny-secp256k1, whose module loads its WebAssembly from its own
// package directory (src/fastsign.ts).
import * as tiny from 'tiny-secp256k1'
import { checked } from './fastsign.js'

/** The WebAssembly secp256k1 the client signs with, if it passed the self-test. */
export const fastSecp256k1 = checked(tiny)
