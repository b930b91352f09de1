// The package as a registry would ship it: `npm pack` of this directory,
// installed with npm into a fresh directory (its dependencies from the npm
// registry, as a dApp's install gets them), then used from there: imported
// by Node (ESM and CommonJS), type-checked by TypeScript against its
// declarations, and loaded by a page in Debian's Chromium from the
// installed browser bundle through an import map. Nothing downloads but
// npm's install.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '../..')
const browserPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const vector = JSON.parse(readFileSync(join(root, 'test/unit/signatures.json'), 'utf8'))[5]

describe('npm pack, installed into a fresh directory', { timeout: 300_000 }, () => {
  let dir, pkg
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'bps-install-'))
    // The build is npm test's (make js-test runs it first): pack what it built.
    const [packed] = JSON.parse(execFileSync(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }))
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'a-dapp', private: true, type: 'module' }))
    execFileSync(npm, ['install', '--no-audit', '--no-fund', '--loglevel=error', join(dir, packed.filename)], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] })
    pkg = join(dir, 'node_modules/@ethersphere/bps')
  })
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  const run = (file, body) => {
    writeFileSync(join(dir, file), body)
    return execFileSync(process.execPath, [file], { cwd: dir, encoding: 'utf8' }).trim()
  }

  test('Node imports it (ESM) and signs with it', () => {
    const out = run(
      'esm.mjs',
      `import { BpsClient, Session, signWithKey, addressOf } from '@ethersphere/bps'
const hex = (b) => Buffer.from(b).toString('hex')
console.log(typeof BpsClient, typeof Session, addressOf('${vector.key}').toHex(), hex(signWithKey(Buffer.from('${vector.key}', 'hex'), Buffer.from('${vector.data}', 'hex'))))`,
    )
    assert.equal(out, `function function ${vector.address} ${vector.signature}`)
  })

  test('Node requires it (CommonJS)', () => {
    const out = run('cjs.cjs', `const bps = require('@ethersphere/bps'); console.log(typeof bps.BpsClient, bps.addressOf('${vector.key}').toHex())`)
    assert.equal(out, `function ${vector.address}`)
  })

  test('TypeScript checks a use of it against its declarations', () => {
    writeFileSync(
      join(dir, 'use.ts'),
      `import { BpsClient, Session, signWithKey, type Signer } from '@ethersphere/bps'
const signer: Signer = { address: '${vector.address}', sign: (d: Uint8Array) => signWithKey(new Uint8Array(32).fill(1), d) }
const s: Session = new BpsClient({ api: 'http://127.0.0.1:1633', peer: 'aa' }).publish({ topic: 't', binding: 'feed', admin: '${vector.address}' }, signer)
export const state: string = s.state
`,
    )
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, skipLibCheck: true, types: [] }, files: ['use.ts'] }))
    const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc')
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir, stdio: 'inherit' })
  })

  test('a page loads the installed browser bundle from an import map, in Chromium', { skip: existsSync(browserPath) ? false : `no Chromium at ${browserPath}` }, async () => {
    const bundle = readFileSync(join(pkg, 'dist/browser/bps.js'))
    const html = `<!doctype html><script type="importmap">{"imports":{"@ethersphere/bps":"/node_modules/@ethersphere/bps/dist/browser/bps.js"}}</script>
<script type="module">import * as bps from '@ethersphere/bps'; window.bps = bps; document.title = 'ready'</script>`
    const server = createServer((req, res) => {
      if (req.url === '/node_modules/@ethersphere/bps/dist/browser/bps.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle)
      else if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html' }).end(html)
      else res.writeHead(404).end()
    })
    await new Promise((r) => server.listen(0, '127.0.0.1', r))
    const { chromium } = await import('playwright-core')
    const browser = await chromium.launch({ executablePath: browserPath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'] })
    try {
      const page = await browser.newPage()
      const errors = []
      page.on('pageerror', (e) => errors.push(e.message))
      await page.goto(`http://127.0.0.1:${server.address().port}/`)
      await page.waitForFunction(() => document.title === 'ready', null, { timeout: 10_000 })
      const got = await page.evaluate((v) => {
        const unhex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16))
        const sig = window.bps.signWithKey(unhex(v.key), unhex(v.data))
        return { fns: typeof window.bps.Session + typeof window.bps.BpsClient, address: window.bps.addressOf(v.key).toHex(), sig: Array.from(sig, (b) => b.toString(16).padStart(2, '0')).join('') }
      }, vector)
      assert.deepEqual(got, { fns: 'functionfunction', address: vector.address, sig: vector.signature })
      assert.deepEqual(errors, [])
    } finally {
      await browser.close()
      await new Promise((r) => server.close(r))
    }
  })
})
