// The browser bundles' signers in Debian's Chromium (headless,
// playwright-core): the default bundle (dist/browser/bps.js) signs with
// @noble/curves and the opt-in one (dist/browser/bps.wasm.js) with
// tiny-secp256k1's WebAssembly, carried inline (no request but the bundle's
// own); both make bee's Go signer's bytes (the 32 vectors of
// test/unit/signatures.json). On a page whose Content Security Policy
// forbids compiling WebAssembly the wasm bundle signs with @noble/curves,
// the same bytes. Needs no cluster.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'

const root = join(dirname(fileURLToPath(import.meta.url)), '../..')
const browserPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const skip = existsSync(browserPath) ? false : `no Chromium at ${browserPath} (apt-get install chromium, or set CHROMIUM_PATH)`
const vectors = JSON.parse(readFileSync(join(root, 'test/unit/signatures.json'), 'utf8'))

const html = `<!doctype html><script type="importmap">{"imports":{"@ethersphere/bps":"./bps.js"}}</script>
<script type="module">import * as bps from '@ethersphere/bps'; window.bps = bps; document.title = 'ready'</script>`

let site, browser, requests
before(async () => {
  if (skip) return
  const bundle = readFileSync(join(root, 'dist/browser/bps.js'))
  const wasm = readFileSync(join(root, 'dist/browser/bps.wasm.js'))
  requests = []
  site = createServer((req, res) => {
    requests.push(req.url)
    // /strict/: no 'wasm-unsafe-eval', so the page cannot compile WebAssembly
    const csp = req.url.startsWith('/strict/') ? { 'content-security-policy': "script-src 'self' 'unsafe-inline'" } : {}
    if (req.url.endsWith('/bps.js')) res.writeHead(200, { 'content-type': 'text/javascript', ...csp }).end(req.url.startsWith('/wasm/') || req.url.startsWith('/strict/') ? wasm : bundle)
    else res.writeHead(200, { 'content-type': 'text/html', ...csp }).end(html)
  })
  await new Promise((ok) => site.listen(0, '127.0.0.1', ok))
  browser = await chromium.launch({ executablePath: browserPath, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
})
after(async () => {
  await browser?.close()
  site?.close()
})

async function signIn(path) {
  const page = await browser.newPage()
  try {
    await page.goto(`http://127.0.0.1:${site.address().port}${path}`)
    await page.waitForFunction(() => document.title === 'ready')
    return await page.evaluate((vs) => {
      const unhex = (s) => new Uint8Array((s.match(/../g) ?? []).map((b) => parseInt(b, 16)))
      const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')
      return {
        backend: window.bps.signerBackend,
        signatures: vs.map((v) => hex(window.bps.signWithKey(unhex(v.key), unhex(v.data)))),
        addresses: vs.map((v) => window.bps.addressOf(v.key).toHex()),
      }
    }, vectors)
  } finally {
    await page.close()
  }
}

test('the default bundle signs with @noble/curves, as bee\'s Go signer does (32 vectors), fetching nothing more', { skip }, async () => {
  requests.length = 0
  const r = await signIn('/')
  assert.equal(r.backend, 'js')
  assert.deepEqual(r.signatures, vectors.map((v) => v.signature))
  assert.deepEqual(r.addresses, vectors.map((v) => v.address))
  assert.deepEqual(requests.filter((u) => u !== '/favicon.ico'), ['/', '/bps.js'], 'the page and the bundle, nothing else')
})

test('the wasm bundle signs with its inline WebAssembly, the same bytes, fetching nothing more', { skip }, async () => {
  requests.length = 0
  const r = await signIn('/wasm/')
  assert.equal(r.backend, 'wasm')
  assert.deepEqual(r.signatures, vectors.map((v) => v.signature))
  assert.deepEqual(r.addresses, vectors.map((v) => v.address))
  assert.deepEqual(requests.filter((u) => u !== '/favicon.ico'), ['/wasm/', '/wasm/bps.js'], 'the page and the bundle, nothing else')
})

test('the wasm bundle on a page that forbids WebAssembly (CSP without wasm-unsafe-eval) signs with @noble/curves, the same bytes', { skip }, async () => {
  const r = await signIn('/strict/')
  assert.equal(r.backend, 'js')
  assert.deepEqual(r.signatures, vectors.map((v) => v.signature))
})

test('the default bundle stays small: under 256 KiB, 1.5 MiB less than the wasm one', () => {
  const size = (f) => readFileSync(join(root, 'dist/browser', f)).length
  assert.ok(size('bps.js') < 256 * 1024, `bps.js ${size('bps.js')} bytes`)
  assert.ok(size('bps.wasm.js') - size('bps.js') > 1.5 * 1024 * 1024, `bps.wasm.js ${size('bps.wasm.js')} bytes, bps.js ${size('bps.js')}`)
})
