// The demo room in a real browser: Debian's Chromium, headless, driven by
// playwright-core (which downloads no browser). The host's page on node-1
// speaks, a reader's page on node-2 shows it within a second; the host lets
// the reader speak, and the host's page shows what the reader says. A
// screenshot of the reader's page is kept (its path is printed).
import assert from 'node:assert/strict'
import { existsSync, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'
import { startDemo } from '../../scripts/demo-server.mjs'

const browserPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const artifacts = join(dirname(fileURLToPath(import.meta.url)), '../../test-artifacts')
const skip = existsSync(browserPath) ? false : `no Chromium at ${browserPath} (apt-get install chromium, or set CHROMIUM_PATH)`

let demo, browser
before(async () => {
  if (skip) return
  demo = await startDemo()
  browser = await chromium.launch({
    executablePath: browserPath,
    headless: true,
    // As root on a closed network: no sandbox, and nothing of Chromium's own
    // reaching out.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
})
after(async () => {
  await browser?.close()
  await demo?.stop()
})

test('the demo room: two pages on two nodes, in Chromium', { skip, timeout: 120_000 }, async () => {
  const ctx = await browser.newContext()
  const hostPage = await ctx.newPage()
  const readerPage = await (await browser.newContext()).newPage()
  const errors = []
  for (const p of [hostPage, readerPage]) p.on('pageerror', (e) => errors.push(e.message))

  await hostPage.goto(`${demo.url}/?node=1&name=Host`)
  await hostPage.waitForSelector('#state.ready', { timeout: 30_000 })
  const hostAddr = await hostPage.textContent('#me')
  await readerPage.goto(`${demo.url}/?node=2&admin=${hostAddr}&name=Reader`)
  // A reader's session waits for the roster, and receives the room meanwhile.
  await readerPage.waitForSelector('#state.waiting', { timeout: 30_000 })
  assert.ok(await readerPage.isDisabled('#text'), 'a reader may not speak before the host lets it')

  await hostPage.fill('#text', 'hello from the host')
  const sent = Date.now()
  await hostPage.click('#send')
  await readerPage.waitForSelector('#log li:has-text("hello from the host")', { timeout: 1_000 })
  const latency = Date.now() - sent
  console.log(`# the host's message reached the reader's page (another node) in ${latency} ms`)

  // The host lets the reader speak: a roster, signed in the host's page.
  const readerAddr = await readerPage.textContent('#me')
  await hostPage.fill('#who', readerAddr)
  await hostPage.click('#grant button')
  await readerPage.waitForSelector('#state.ready', { timeout: 20_000 }).catch(async (e) => {
    throw new Error(`${e.message}\nhost's log: ${await hostPage.textContent('#log')}\nreader's log: ${await readerPage.textContent('#log')}`)
  })
  assert.match(await readerPage.textContent('#roster'), new RegExp(readerAddr))
  await readerPage.fill('#text', 'the reader speaks')
  await readerPage.click('#send')
  await hostPage.waitForSelector('#log li:has-text("the reader speaks")', { timeout: 5_000 })

  mkdirSync(artifacts, { recursive: true })
  const shot = join(artifacts, 'demo-reader.png')
  await readerPage.screenshot({ path: shot, fullPage: true })
  console.log(`# screenshot: ${shot}`)
  assert.deepEqual(errors, [])
})
