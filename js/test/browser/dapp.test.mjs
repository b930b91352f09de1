// A dApp page on its own origin, in Debian's Chromium (headless, driven by
// playwright-core, which downloads no browser): a static page on a port of
// its own loads the browser bundle (dist/browser/bps.js) from an import map
// and talks to the nodes directly — no proxy, no bundler, no flag on the
// cluster (bee-bps dev allows loopback pages by default). On full and on
// light nodes:
//
//   1. CORS: GET /pubsub/ and the admin's grant (a POST with a preflight)
//      from the page;
//   2. persistence from the page (swarm-postage-batch-id as a query
//      parameter);
//   3. a permanent refusal reaches the page as an HttpError it can read
//      (close 4400), not retried;
//   5. resume: a page reloaded mid-stream resumes at the cursor it kept,
//      every update exactly once, the missed ones recovered.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'
import { feedId, topicBytes } from '../../dist/esm/index.js'
import { startCluster, usableStamp } from '../../scripts/cluster.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '../..')
const browserPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const skip = existsSync(browserPath) ? false : `no Chromium at ${browserPath} (apt-get install chromium, or set CHROMIUM_PATH)`

// The page: the bundle through an import map, as a dApp without a bundler
// loads it.
const html = `<!doctype html><meta charset="utf-8"><title>bps dApp</title>
<script type="importmap">{"imports":{"@ethersphere/bps":"/bps.js"}}</script>
<script type="module">
  import * as bps from '@ethersphere/bps'
  window.bps = bps
  document.title = 'ready'
</script>`

/** Serves the page and the bundle on a loopback port of its own: the dApp's origin. */
async function servePage() {
  const bundle = readFileSync(join(root, 'dist/browser/bps.js'))
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname
    if (path === '/bps.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle)
    else if (path === '/') res.writeHead(200, { 'content-type': 'text/html' }).end(html)
    else res.writeHead(404).end()
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }
}

/**
 * Resolves once node api serves the SOC (owner, id) (bee's GET /soc), within
 * 60 s. Ask a full node (the broker), never the reader's: bee's retrieval
 * skips, for a minute, each peer that failed to deliver a chunk, so a light
 * node asked while the upload is still being pushed fails at both full peers
 * and then answers 404 at once for a minute, to this wait and to the
 * recovery after it alike. A full node answers from its own store once the
 * push or its neighbour's sync reaches it.
 */
async function stored(api, owner, id) {
  const url = `${api}/soc/${owner}/${Buffer.from(id).toString('hex')}`
  const deadline = Date.now() + 60_000
  let last = ''
  while (Date.now() < deadline) {
    const res = await fetch(url, { signal: AbortSignal.timeout(15_000) }).catch((e) => ({ status: 0, text: async () => e.message }))
    if (res.status === 200) return
    last = `${res.status} ${await res.text()}`
    await new Promise((r) => setTimeout(r, 200)) // the polling pace, as usableStamp's
  }
  throw new Error(`${url} not retrievable within 60 s: ${last}`)
}

let browser, site
before(async () => {
  if (skip) return
  site = await servePage()
  browser = await chromium.launch({
    executablePath: browserPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
})
after(async () => {
  await browser?.close()
  await site?.close()
})

/** A fresh page (its own browser context: another user) with the bundle loaded. */
async function openPage() {
  const ctx = await browser.newContext()
  const page = await ctx.newPage()
  const errors = []
  page.on('pageerror', (e) => errors.push(e.message))
  await page.goto(site.url + '/')
  await page.waitForFunction(() => document.title === 'ready', null, { timeout: 10_000 })
  return { page, errors, close: () => ctx.close() }
}

for (const fullNode of [true, false]) {
  describe(`a dApp page on its own origin, ${fullNode ? 'full' : 'light'} nodes`, { skip, timeout: 300_000 }, () => {
    let cl, A, B
    before(async () => {
      if (skip) return
      cl = await startCluster({ fullNode })
      ;[A, B] = [cl.nodes[1], cl.nodes[2]]
      await usableStamp(A)
    })
    after(async () => {
      await cl?.stop()
    })

    test('CORS, persistence, a readable refusal and an exact resume, from pages', { timeout: 240_000 }, async () => {
      const pub = await openPage()
      const reader = await openPage()
      const broker = cl.broker.overlay
      const topic = `dapp-${fullNode ? 'full' : 'light'}-${Date.now()}`

      // 1. CORS: a plain GET from the page reads the node's answer.
      const topics = await pub.page.evaluate(async (api) => (await fetch(api + '/pubsub/')).status, A.api)
      assert.equal(topics, 200)

      // 3. A permanent refusal: the node itself named as the broker. The
      // page reads the status and the reason; the session does not retry.
      const refusal = await pub.page.evaluate(async ({ api, self }) => {
        const s = new window.bps.Session({ api, peer: self, cohort: { topic: 'refused', binding: 'feed', admin: '11'.repeat(20) }, reconnect: { initialDelay: 10 } })
        const retries = []
        s.on('disconnect', (e) => retries.push(e.retry))
        const { error } = await s.waitFor('close', undefined, 20_000)
        return { name: error.name, status: error.status, field: error.reasons?.[0]?.field, message: error.message, retries }
      }, { api: A.api, self: A.overlay })
      assert.equal(refusal.name, 'HttpError', JSON.stringify(refusal))
      assert.equal(refusal.status, 400)
      assert.equal(refusal.field, 'peer')
      assert.match(refusal.message, /is this node/)
      assert.deepEqual(refusal.retries, [false])

      // 2. The admin publishes persistently from the page (the batch as a
      // query parameter), the broker named by overlay; grants the reader
      // through POST …/service (a preflighted CORS request).
      const key = await pub.page.evaluate(() => Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, '0')).join(''))
      const admin = await pub.page.evaluate((k) => window.bps.addressOf(k).toHex(), key)
      const cohort = { topic, binding: 'feed', admin }
      await pub.page.evaluate(async ({ api, peer, cohort, key, batch }) => {
        const s = new window.bps.Session({ api, peer, cohort, key, postageBatch: batch })
        window.pub = s
        await s.ready(30_000)
        window.publish = async (n) => {
          for (let i = 0; i < n; i++) {
            const sent = s.send(`update ${s.index}`)
            if (sent.index === undefined) throw new Error('no index')
          }
        }
        await s.grant('22'.repeat(20)) // a roster: CORS on POST, from the page
      }, { api: A.api, peer: broker, cohort, key, batch: A.batch })

      // 5. The reader's page subscribes from index 0, reads 3 updates,
      // keeps its cursor, is reloaded, and resumes at the cursor while the
      // admin went on: every update exactly once, the missed ones recovered.
      const readerOpen = async (resume) =>
        reader.page.evaluate(async ({ api, peer, cohort, resume }) => {
          window.got = []
          const s = new window.bps.Session({ api, peer, cohort, resume })
          window.sub = s
          s.on('message', (m) => {
            window.got.push({ index: Number(m.index), recovered: !!m.recovered, owner: m.owner, text: new TextDecoder().decode(m.payload) })
            localStorage.setItem('cursor', String(s.cursor))
          })
          s.on('gap', (e) => window.got.push({ gap: [Number(e.from), Number(e.to)] }))
          await s.ready(30_000)
        }, { api: B.api, peer: broker, cohort, resume })
      const received = (n) =>
        reader.page.waitForFunction((n) => window.got.length >= n, n, { timeout: 60_000 }).then(() => reader.page.evaluate(() => window.got))

      await readerOpen(0)
      await pub.page.evaluate(() => window.publish(3))
      const first = await received(3)
      assert.deepEqual(first.map((m) => m.index), [0, 1, 2], JSON.stringify(first))
      const cursor = await reader.page.evaluate(() => localStorage.getItem('cursor'))
      assert.equal(cursor, '3', 'the cursor advances in the browser')

      await reader.page.reload()
      await reader.page.waitForFunction(() => document.title === 'ready')
      await pub.page.evaluate(() => window.publish(3)) // 3, 4, 5 while the reader is away
      // The uploads land (a light node's take a second or two each)
      // before the reader resumes: the broker holds each (see stored), so
      // the reader's node retrieves it at its first try.
      for (const i of [3n, 4n, 5n]) await stored(cl.broker.api, admin, feedId(topicBytes(topic), i))
      const saved = await reader.page.evaluate(() => localStorage.getItem('cursor'))
      await readerOpen(saved)
      await pub.page.evaluate(() => window.publish(2)) // 6, 7 live
      const after = await reader.page.waitForFunction(() => window.got.filter((m) => m.index === 7).length > 0, null, { timeout: 90_000 })
        .then(() => reader.page.evaluate(() => window.got))
      const seen = after.flatMap((m) => (m.gap ? Array.from({ length: m.gap[1] - m.gap[0] + 1 }, (_, i) => m.gap[0] + i) : [m.index]))
      assert.deepEqual([...seen].sort((a, b) => a - b), [3, 4, 5, 6, 7], `every update once, recovered or a gap: ${JSON.stringify(after)}`)
      for (const m of [...first, ...after]) if (!m.gap) assert.equal(m.owner, admin, `update ${m.index} attributed to the admin: ${JSON.stringify(m)}`)
      for (const m of after) {
        if (m.index >= 3 && m.index <= 5) assert.ok(m.recovered, `update ${m.index} recovered: ${JSON.stringify(after)}`)
        if (m.index >= 6) assert.ok(!m.recovered, `update ${m.index} live: ${JSON.stringify(after)}`)
      }

      assert.deepEqual(pub.errors, [])
      assert.deepEqual(reader.errors, [])
      await pub.page.evaluate(() => window.pub.close())
      await reader.page.evaluate(() => window.sub.close())
      await pub.close()
      await reader.close()
    })
  })
}

/** A port P with P…P+3 and P+1000…P+1003 free on loopback: the dev cluster's API and p2p ports with --keys-dir. */
async function freePorts() {
  const net = await import('node:net')
  const free = (p) =>
    new Promise((r) => {
      const s = net.createServer().once('error', () => r(false))
      s.listen(p, '127.0.0.1', () => s.close(() => r(true)))
    })
  for (let tries = 0; tries < 50; tries++) {
    const p = 20000 + Math.floor(Math.random() * 30000)
    let ok = true
    for (const q of [p, p + 1, p + 2, p + 3, p + 1000, p + 1001, p + 1002, p + 1003]) if (!(ok = await free(q))) break
    if (ok) return p
  }
  throw new Error('no free ports')
}

for (const fullNode of [true, false]) describe(`two pages survive a restart of the cluster, ${fullNode ? 'full' : 'light'} nodes`, { skip, timeout: 300_000 }, () => {
  test('the cluster stops under two open pages and starts again: both carry on without a reload', { timeout: 240_000 }, async () => {
    const { mkdtempSync, rmSync } = await import('node:fs')
    const { tmpdir } = await import('node:os')
    const keys = mkdtempSync(join(tmpdir(), 'bps-keys-'))
    const port = await freePorts()
    const args = ['--keys-dir', keys, '--api-addr', `127.0.0.1:${port}`]
    let cl = await startCluster({ fullNode, args })
    const [A, B] = [cl.nodes[1], cl.nodes[2]]
    const broker = cl.broker.overlay
    const pub = await openPage()
    const reader = await openPage()
    try {
      const key = await pub.page.evaluate(() => Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, '0')).join(''))
      const admin = await pub.page.evaluate((k) => window.bps.addressOf(k).toHex(), key)
      const cohort = { topic: `restart-${Date.now()}`, binding: 'feed', admin }
      const reconnect = { initialDelay: 200, maxDelay: 2_000 }
      await reader.page.evaluate(async ({ api, peer, cohort, reconnect }) => {
        window.got = []
        window.closes = []
        const s = new window.bps.Session({ api, peer, cohort, reconnect })
        window.sub = s
        s.on('message', (m) => window.got.push(Number(m.index)))
        s.on('gap', (e) => window.got.push(`gap ${e.from}-${e.to}`))
        s.on('disconnect', (e) => window.closes.push(e.error.code ?? e.error.name))
        await s.ready(30_000)
      }, { api: B.api, peer: broker, cohort, reconnect })
      await pub.page.evaluate(async ({ api, peer, cohort, key, reconnect }) => {
        window.closes = []
        const s = new window.bps.Session({ api, peer, cohort, key, reconnect })
        window.pub = s
        s.on('disconnect', (e) => window.closes.push(e.error.code ?? e.error.status ?? e.error.name))
        s.on('disconnect', (e) => (window.log = (window.log ?? []).concat(`${e.retry} ${e.error.message}`)))
        await s.ready(30_000)
        s.send('before')
      }, { api: A.api, peer: broker, cohort, key, reconnect })
      await reader.page.waitForFunction(() => window.got.includes(0), null, { timeout: 20_000 })

      await cl.stop()
      for (const p of [pub, reader]) await p.page.waitForFunction(() => window.closes.length > 0, null, { timeout: 30_000 })
      const closes = [await pub.page.evaluate(() => window.closes[0]), await reader.page.evaluate(() => window.closes[0])]
      assert.deepEqual(closes, [1001, 1001], 'the node going away closes its sessions with 1001')

      cl = await startCluster({ fullNode, args })
      assert.equal(cl.broker.overlay, broker, 'the broker keeps its overlay across the restart')
      assert.equal(cl.nodes[1].api, A.api)
      // Both pages reconnect by themselves; the publisher goes on at its next index.
      await pub.page.waitForFunction(() => window.pub.state === 'ready', null, { timeout: 90_000 }).catch(async (e) => {
        throw new Error(`${e.message}: publisher ${await pub.page.evaluate(() => window.pub.state)}, ${JSON.stringify(await pub.page.evaluate(() => window.log))}`)
      })
      await reader.page.waitForFunction(() => window.sub.state === 'ready', null, { timeout: 90_000 })
      await pub.page.evaluate(() => window.pub.send('after'))
      await reader.page.waitForFunction(() => window.got.includes(1), null, { timeout: 60_000 }).catch(async (e) => {
        throw new Error(`${e.message}: reader got ${JSON.stringify(await reader.page.evaluate(() => window.got))}, closes ${JSON.stringify(await reader.page.evaluate(() => window.closes))}`)
      })
      assert.deepEqual(await reader.page.evaluate(() => window.got), [0, 1])
      assert.deepEqual(pub.errors, [])
      assert.deepEqual(reader.errors, [])
    } finally {
      await pub.close()
      await reader.close()
      await cl.stop()
      rmSync(keys, { recursive: true, force: true })
    }
  })
})
