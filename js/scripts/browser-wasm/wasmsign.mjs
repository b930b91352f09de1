// The browser bundle's src/wasmsign.ts (scripts/build.mjs): tiny-secp256k1
// with its WebAssembly inline (loader.mjs), behind the self-test.
import * as tiny from 'tiny-secp256k1'
import { checked } from '../../dist/esm/fastsign.js'

export const fastSecp256k1 = checked(tiny)
