// A page under load and on a flaky network, in Debian's Chromium (headless,
// driven by playwright-core, which downloads no browser), on a dev cluster
// of full nodes:
//
//   - the ticker example (examples/worker): a page publishing 100 updates
//     a second, its key in a Web Worker, and the same page signing on its
//     main thread, for comparison. Asserted: every update arrives, once.
//     Measured and printed, never asserted: the main thread's long tasks
//     (> 50 ms, the browser's PerformanceObserver), a 10 ms timer's lag,
//     publish → receive.
//   - a network drop (not a restart): a TCP proxy between a page and its
//     node is cut — every connection dropped, new ones refused — and
//     restored while the publisher goes on. A reader's page resumes at its
//     cursor: every update exactly once, recovered from storage or
//     reported as a gap, none silently missing, none twice. A publisher's
//     page claims its next index again and goes on where it was; its
//     reader gets every update once, in order (a frame lost with the
//     connection, reported as a gap).
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { chromium } from 'playwright-core'
import { startCluster, usableStamp } from '../../scripts/cluster.mjs'
import { serveExample } from '../../scripts/serve-example.mjs'
import { startProxy } from '../e2e/proxy.mjs'

const browserPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const skip = existsSync(browserPath) ? false : `no Chromium at ${browserPath} (apt-get install chromium, or set CHROMIUM_PATH)`

describe('pages under load and on a flaky network, full nodes', { skip, timeout: 600_000 }, () => {
  let browser, site, cl, broker, A, B
  before(async () => {
    if (skip) return
    site = await serveExample('worker')
    browser = await chromium.launch({
      executablePath: browserPath,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    })
    cl = await startCluster({ fullNode: true })
    broker = cl.broker.overlay
    ;[A, B] = [cl.nodes[1], cl.nodes[2]]
  })
  after(async () => {
    await browser?.close()
    await site?.close()
    await cl?.stop()
  })

  /** A page of the example's origin (its own browser context: another user); errors collected. */
  async function openPage(path = '/') {
    const ctx = await browser.newContext()
    const page = await ctx.newPage()
    const errors = []
    page.on('pageerror', (e) => errors.push(e.message))
    await page.goto(site.url + path)
    return { page, errors, close: () => ctx.close() }
  }

  for (const signer of ['worker', 'main']) {
    test(`a ticker at 100 updates a second, signing ${signer === 'worker' ? 'in a Web Worker' : 'on the main thread'}: every update arrives once`, { timeout: 120_000 }, async (t) => {
      const count = 500
      const q = new URLSearchParams({ api: A.api, sub: B.api, peer: broker, rate: '100', count: String(count), signer })
      const p = await openPage(`/?${q}`)
      try {
        const r = await p.page.evaluate(() => window.result)
        const line = `${signer}: ${r.received}/${count} in ${r.seconds.toFixed(1)} s; main thread: ${r.longTasks.count} long tasks, ${r.longTasks.totalMs.toFixed(0)} ms in all, the longest ${r.longTasks.maxMs.toFixed(0)} ms; 10 ms timer lag p50 ${r.timerLagMs.p50.toFixed(1)} ms, p99 ${r.timerLagMs.p99.toFixed(1)} ms, max ${r.timerLagMs.max.toFixed(1)} ms; publish → receive p50 ${r.publishToReceiveMs.p50.toFixed(1)} ms, p99 ${r.publishToReceiveMs.p99.toFixed(1)} ms`
        t.diagnostic(line)
        assert.equal(r.mode, signer)
        assert.deepEqual(r.missing, [], `every update arrives; the sessions saw: ${JSON.stringify(r.events)}`)
        assert.equal(r.received, count)
        assert.equal(r.duplicates, 0, 'none twice')
        assert.deepEqual(p.errors, [])
      } finally {
        await p.close()
      }
    })
  }

  /**
   * Opens in p's page a session; window.log holds what it saw: { i, rec } per
   * message, { gap: [from, to] } per gap, { drop } per disconnection.
   */
  const openSession = (p, o) =>
    p.page.evaluate(async ({ api, peer, cohort, key, batch, resume }) => {
      const bps = await import('./bps.js')
      window.log = []
      const s = new bps.Session({ api, peer, cohort, key, postageBatch: batch, resume, reconnect: { initialDelay: 100, maxDelay: 1_000 } })
      window.s = s
      s.on('message', (m) => window.log.push({ i: Number(m.index), rec: !!m.recovered }))
      s.on('gap', (e) => window.log.push({ gap: [Number(e.from), Number(e.to)] }))
      s.on('disconnect', (e) => window.log.push({ drop: e.error.message, retry: e.retry }))
      await s.ready(30_000)
    }, o)

  /** Every index 0..n-1 seen exactly once in log, as a message or within a gap. */
  function exactlyOnce(log, n) {
    const seen = log.flatMap((e) => (e.gap ? Array.from({ length: e.gap[1] - e.gap[0] + 1 }, (_, k) => e.gap[0] + k) : e.i !== undefined ? [e.i] : []))
    assert.deepEqual([...seen].sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i), `every update once, as a message or in a gap: ${JSON.stringify(log)}`)
  }

  /**
   * Publishes from the page, every 50 ms while the session is ready, until n
   * were sent (window.sent); counts the ticks it skipped while it was not
   * (window.skipped). Resolves at once.
   */
  const startTicker = (p, n) =>
    p.page.evaluate((n) => {
      window.sent = 0
      window.skipped = 0
      window.ticker = new Promise((done, fail) => {
        const tick = () => {
          if (window.sent >= n) return done(window.sent)
          if (window.s.state !== 'ready') window.skipped++
          else {
            try {
              window.s.send(`update ${window.sent}`)
              window.sent++
            } catch (e) {
              window.tickerError = String(e)
              return fail(e)
            }
          }
          setTimeout(tick, 50)
        }
        tick()
      })
    }, n)
  const sentSoFar = (p) => p.page.evaluate(() => window.sent)
  /** Resolves once the page's publisher sent at least n. */
  const untilSent = (p, n) =>
    p.page.waitForFunction((n) => window.sent >= n, n, { timeout: 60_000 }).catch(async (e) => {
      const [sent, state, log, err] = await p.page.evaluate(() => [window.sent, window.s.state, window.log, window.tickerError])
      throw new Error(`${e.message}: the publisher sent ${sent} of ${n}${err ? ` and stopped: ${err}` : ''}, its session ${state}, it saw ${JSON.stringify(log)}`)
    })

  test("the reader's connection drops and comes back: it resumes at its cursor, every update once", { timeout: 180_000 }, async (t) => {
    await usableStamp(A)
    const pub = await openPage()
    const reader = await openPage()
    const proxy = await startProxy(B.api)
    try {
      const key = await pub.page.evaluate(() => Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, '0')).join(''))
      const admin = await pub.page.evaluate(async (k) => (await import('./bps.js')).addressOf(k).toHex(), key)
      const cohort = { topic: `drop-reader-${Date.now()}`, binding: 'feed', admin }
      // A persistent publisher: what the reader misses while away is in Swarm to recover.
      await openSession(pub, { api: A.api, peer: broker, cohort, key, batch: A.batch })
      await openSession(reader, { api: proxy.url, peer: broker, cohort, resume: 0 })
      const n = 40
      await startTicker(pub, n)
      await reader.page.waitForFunction(() => window.log.filter((e) => e.i !== undefined).length >= 5, null, { timeout: 30_000 })

      // The network drops: the reader's connection is cut, and new ones are
      // refused while the publisher sends 10 more.
      const at = await sentSoFar(pub)
      proxy.cut(true)
      await reader.page.waitForFunction(() => window.log.some((e) => e.drop), null, { timeout: 30_000 })
      await untilSent(pub, at + 10)
      proxy.resume()
      await pub.page.evaluate(() => window.ticker)
      await reader.page.waitForFunction(
        (n) => {
          const seen = new Set()
          for (const e of window.log) {
            if (e.i !== undefined) seen.add(e.i)
            if (e.gap) for (let k = e.gap[0]; k <= e.gap[1]; k++) seen.add(k)
          }
          return seen.size >= n
        },
        n,
        { timeout: 90_000 },
      ).catch(async (e) => {
        throw new Error(`${e.message}: reader saw ${JSON.stringify(await reader.page.evaluate(() => window.log))}`)
      })
      const log = await reader.page.evaluate(() => window.log)
      exactlyOnce(log, n)
      const recovered = log.filter((e) => e.rec).length
      const gaps = log.filter((e) => e.gap).reduce((k, e) => k + e.gap[1] - e.gap[0] + 1, 0)
      const drops = log.filter((e) => e.drop)
      assert.ok(drops.every((d) => d.retry), `every drop retried: ${JSON.stringify(drops)}`)
      const line = `reader dropped at update ~${at}: ${n} updates, ${recovered} recovered from storage, ${gaps} in gaps, ${n - recovered - gaps} live; ${drops.length} disconnection(s)`
      t.diagnostic(line)
      assert.deepEqual(pub.errors, [])
      assert.deepEqual(reader.errors, [])
      await pub.page.evaluate(() => window.s.close())
      await reader.page.evaluate(() => window.s.close())
    } finally {
      await proxy.close()
      await pub.close()
      await reader.close()
    }
  })

  test("the publisher's connection drops and comes back: it claims its next index and goes on", { timeout: 180_000 }, async (t) => {
    const pub = await openPage()
    const reader = await openPage()
    const proxy = await startProxy(A.api)
    try {
      const key = await pub.page.evaluate(() => Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, '0')).join(''))
      const admin = await pub.page.evaluate(async (k) => (await import('./bps.js')).addressOf(k).toHex(), key)
      const cohort = { topic: `drop-publisher-${Date.now()}`, binding: 'feed', admin }
      await openSession(reader, { api: B.api, peer: broker, cohort })
      await openSession(pub, { api: proxy.url, peer: broker, cohort, key })
      const n = 30
      await startTicker(pub, n)
      await untilSent(pub, 5)
      proxy.cut(true)
      await pub.page.waitForFunction(() => window.log.some((e) => e.drop), null, { timeout: 30_000 })
      const away = await sentSoFar(pub)
      // The ticker sends nothing while its session is not ready: 10 of its
      // ticks pass with the network down.
      const skipped = await pub.page.evaluate(() => window.skipped)
      await pub.page.waitForFunction((k) => window.skipped >= k, skipped + 10, { timeout: 30_000 })
      assert.equal(await sentSoFar(pub), away, 'nothing is sent while the connection is down')
      proxy.resume()
      await pub.page.evaluate(() => window.ticker)
      await reader.page.waitForFunction((n) => window.log.some((e) => e.i === n - 1), n, { timeout: 60_000 }).catch(async (e) => {
        throw new Error(`${e.message}: reader saw ${JSON.stringify(await reader.page.evaluate(() => window.log))}`)
      })
      // A frame the page wrote as the connection died (before the page
      // heard of it) is lost with it: the reader is told, as a gap.
      const log = await reader.page.evaluate(() => window.log)
      exactlyOnce(log, n)
      const got = log.filter((e) => e.i !== undefined).map((e) => e.i)
      assert.deepEqual(got, [...got].sort((a, b) => a - b), 'in order')
      assert.deepEqual(log.filter((e) => e.drop), [], 'the reader saw no drop')
      const gaps = log.filter((e) => e.gap).reduce((k, e) => k + e.gap[1] - e.gap[0] + 1, 0)
      const drops = (await pub.page.evaluate(() => window.log)).filter((e) => e.drop)
      const line = `publisher dropped after update ${away - 1}: ${drops.length} disconnection(s), resumed at ${away}; the reader got ${got.length} of ${n} in order, ${gaps} in gaps`
      t.diagnostic(line)
      assert.deepEqual(pub.errors, [])
      assert.deepEqual(reader.errors, [])
      await pub.page.evaluate(() => window.s.close())
      await reader.page.evaluate(() => window.s.close())
    } finally {
      await proxy.close()
      await pub.close()
      await reader.close()
    }
  })
})
