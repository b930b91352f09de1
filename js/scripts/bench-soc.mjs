// CPU per signed chunk: this client's SOC and BMT (js/src/soc.ts: the BMT
// over the segments that hold payload, one signature with @noble/curves,
// the owner's address derived once) against bee-js's own functions
// (Bee.makeContentAddressedChunk, then toSingleOwnerChunk with a bee-js
// PrivateKey: bee-js 12's makeSingleOwnerChunk takes no other signer — it
// makes a PrivateKey of what it is given, derives the public key twice and
// signs with bee-js's JavaScript secp256k1), in the same run, interleaved,
// in Node and (--browser) in a page of headless Chromium. Each function is
// checked against the other first: the same BMT address and SOC address,
// and both signatures recover to the owner.
//
//   node scripts/bench-soc.mjs [--browser] [chunks=50]
import { createServer } from 'node:http'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const args = process.argv.slice(2)
const browser = args[0] === '--browser'
const chunks = Number((browser ? args[1] : args[0]) ?? 50)
const here = dirname(fileURLToPath(import.meta.url))

// Runs in Node or in the page: m holds bee-js's Bee, PrivateKey, Signature and this client's soc.ts.
async function run(m, n) {
  const { Bee, PrivateKey, Signature, soc } = m
  const bee = new Bee('http://localhost:1633') // holds bee-js's chunk functions; makes no request
  const secret = globalThis.crypto.getRandomValues(new Uint8Array(32))
  const key = new PrivateKey(secret)
  const owner = soc.ownerOf(key)
  const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')
  const payloads = { '10 B': new TextEncoder().encode('message 42'), '4096 B': globalThis.crypto.getRandomValues(new Uint8Array(4096)) }
  const out = {}
  for (const [size, payload] of Object.entries(payloads)) {
    const id = globalThis.crypto.getRandomValues(new Uint8Array(32))
    // Agreement first.
    const ours = soc.signSOC(key, id, payload)
    const theirs = bee.makeContentAddressedChunk(payload).toSingleOwnerChunk(id, key)
    if (hex(ours.address) !== theirs.address.toHex()) throw new Error(`${size}: SOC addresses differ`)
    const wrapped = bee.makeContentAddressedChunk(payload).address.toHex()
    if (hex(ours.wrappedAddress) !== wrapped) throw new Error(`${size}: BMT addresses differ`)
    for (const sig of [ours.signature, theirs.signature.toUint8Array()]) {
      const rec = new Signature(sig).recoverPublicKey(soc.concat(id, ours.wrappedAddress)).address()
      if (rec.toHex() !== hex(owner)) throw new Error(`${size}: a signature does not recover to the owner`)
    }
    // Interleaved: each round times one of each.
    const t = { 'SOC, ours': [], 'SOC, bee-js': [], 'BMT, ours': [], 'BMT, bee-js': [] }
    for (let i = 0; i < n; i++) {
      id[0] = i
      let a = performance.now()
      soc.signSOC(key, id, payload)
      t['SOC, ours'].push(performance.now() - a)
      a = performance.now()
      bee.makeContentAddressedChunk(payload).toSingleOwnerChunk(id, key)
      t['SOC, bee-js'].push(performance.now() - a)
      a = performance.now()
      soc.chunkAddress(ours.span, payload)
      t['BMT, ours'].push(performance.now() - a)
      a = performance.now()
      bee.makeContentAddressedChunk(payload)
      t['BMT, bee-js'].push(performance.now() - a)
    }
    out[size] = t
  }
  return out
}

const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]
let r
if (!browser) {
  const beejs = await import('@ethersphere/bee-js')
  r = await run({ ...beejs, soc: { ...(await import('../dist/esm/soc.js')), concat: (await import('../dist/esm/bytes.js')).concat } }, chunks)
} else {
  // One module for the page: bee-js as its browser build resolves, and soc.ts.
  const esbuild = await import('esbuild')
  const built = await esbuild.build({
    stdin: {
      contents: `export { Bee, PrivateKey, Signature } from '@ethersphere/bee-js'; import * as s from './dist/esm/soc.js'; import { concat } from './dist/esm/bytes.js'; export const soc = { ...s, concat }`,
      resolveDir: join(here, '..'),
    },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    minify: true,
    write: false,
    logLevel: 'error',
    alias: { axios: join(here, 'browser-stubs/axios.mjs'), debug: join(here, 'browser-stubs/debug.mjs') },
  })
  const bundle = built.outputFiles[0].contents
  const html = `<!doctype html><script type="module">import * as m from '/m.js'; window.m = m; document.title = 'ready'</script>`
  const isolated = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' }
  const site = createServer((req, res) => {
    if (req.url === '/m.js') res.writeHead(200, { 'content-type': 'text/javascript', ...isolated }).end(bundle)
    else res.writeHead(200, { 'content-type': 'text/html', ...isolated }).end(html)
  })
  await new Promise((ok) => site.listen(0, '127.0.0.1', ok))
  const { chromium } = await import('playwright-core')
  const b = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  try {
    const page = await b.newPage()
    await page.goto(`http://127.0.0.1:${site.address().port}/`)
    await page.waitForFunction(() => document.title === 'ready')
    r = await page.evaluate(`(${run.toString()})(window.m, ${chunks})`)
  } finally {
    await b.close()
    site.close()
  }
}
for (const [size, t] of Object.entries(r)) {
  console.log(
    `${browser ? 'Chromium' : 'Node'}, payload ${size}, ${chunks} chunks, p50 (p90): ` +
      Object.entries(t)
        .map(([k, xs]) => `${k} ${q(xs, 0.5).toFixed(3)} (${q(xs, 0.9).toFixed(3)}) ms`)
        .join('; '),
  )
}
