// Every configuration of the node's WebSocket API, round-tripped through a
// real `bee-bps dev` cluster with this client: the broker (full) and two
// more nodes, full or light; publishers on one node, receivers on another.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, afterEach, before, describe, test } from 'node:test'
import { PrivateKey } from '@ethersphere/bee-js'
import { anchorTopic, BpsClient, CloseError, feedId, HttpError, ownerTopic, StateError, topicBytes } from '../../dist/esm/index.js'
import { startCluster, usableStamp } from '../../scripts/cluster.mjs'
import { startProxy } from './proxy.mjs'

const T = 20_000 // one wait
const newKey = () => new PrivateKey(new Uint8Array(randomBytes(32)))
const addrOf = (k) => k.publicKey().address().toHex()
const utf8 = (b) => new TextDecoder().decode(b)
let seq = 0
const topicName = (what) => `js-e2e-${what}-${process.pid}-${Date.now()}-${seq++}`

/** Collects a session's messages; next(n) resolves with the first n, and fails when s or any of also closes first. */
function collect(s, ...also) {
  const got = []
  let waiters = []
  s.on('message', (m) => {
    got.push(m)
    waiters = waiters.filter((w) => !w())
  })
  return {
    got,
    next(n, timeout = T) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (got.length < n) return false
          clearTimeout(timer)
          offClose()
          resolve(got.slice(0, n))
          return true
        }
        const timer = setTimeout(() => reject(new Error(`${got.length} of ${n} messages within ${timeout} ms: ${got.map((m) => utf8(m.payload)).join(', ')}`)), timeout)
        const offs = [s, ...also].map((x) =>
          x.on('close', (e) => {
            clearTimeout(timer)
            reject(e.error ?? new Error('closed'))
          }),
        )
        const offClose = () => offs.forEach((off) => off())
        if (!check()) waiters.push(check)
      })
    },
  }
}

export function configurations({ fullNode }) {
  describe(`every configuration, ${fullNode ? 'full' : 'light'} nodes`, { timeout: 300_000 }, () => {
    let cl, peer, A, B
    const open = []
    const client = (node) => new BpsClient({ api: node.api, peer })
    const track = (s) => (open.push(s), s)

    before(async () => {
      cl = await startCluster({ fullNode })
      peer = cl.broker.underlays[0]
      ;[A, B] = [cl.nodes[1], cl.nodes[2]]
    })
    // Each test closes what it opened: one client (127.0.0.1) holds
    // sessions in at most 8 cohorts at a broker (429 past it).
    afterEach(async () => {
      await Promise.all(open.splice(0).map((s) => s.close()))
    })
    after(async () => {
      await cl?.stop()
    })

    test('live-stream: the admin publishes a feed, a subscriber on another node receives it in order', { timeout: 60_000 }, async () => {
      const alice = newKey()
      const cohort = { topic: topicName('live'), binding: 'feed', admin: addrOf(alice) }
      const sub = track(client(B).subscribe(cohort))
      const r = await sub.ready(T)
      assert.equal(r.role, 'subscriber')
      const msgs = collect(sub)
      const pub = track(client(A).publish(cohort, alice))
      const authed = pub.waitFor('auth', undefined, T)
      await pub.ready(T)
      // The claim: an AUTH under the challenge the node handed (Rev 8).
      assert.equal((await authed).challenge, pub.readyFrame.challenge)
      assert.equal(pub.index, 0n)
      for (let i = 0; i < 3; i++) pub.send(`update ${i}`)
      const got = await msgs.next(3)
      assert.deepEqual(got.map((m) => [m.index, m.owner, utf8(m.payload)]), [0n, 1n, 2n].map((i) => [i, addrOf(alice), `update ${i}`]))

      // The admin ends the stream: the service frame, then 1000, and no reconnect.
      const svc = sub.waitFor('service', (e) => e.kind === 'EOS', T)
      const closed = sub.waitFor('close', undefined, T)
      assert.equal(await pub.endStream(), 0n)
      assert.equal((await svc).kind, 'EOS')
      const e = (await closed).error
      assert.ok(e instanceof CloseError && e.code === 1000 && e.endOfStream, `closed with ${e}`)
      assert.equal(sub.state, 'closed')
    })

    test('spectator-jam: a publisher waits for the roster, publishes once granted, waits again once revoked', { timeout: 60_000 }, async () => {
      const alice = newKey()
      const bob = newKey()
      const cohort = { topic: topicName('spectator'), binding: 'anchor', admin: addrOf(alice) }
      const fields = ['address', 'identifier', 'payload']
      const admin = track(client(A).publish(cohort, alice, { fields }))
      await admin.ready(T)
      const audience = track(client(B).subscribe(cohort, { fields }))
      await audience.ready(T)
      const heard = collect(audience)
      const seat = track(client(B).publish(cohort, bob, { fields }))
      const w = await seat.waitFor('waiting', undefined, T)
      assert.match(w.reason, /roster/)
      assert.throws(() => seat.send('too early'), StateError)

      const granted = audience.waitFor('service', (e) => e.publishers.includes(addrOf(bob)), T)
      const ready = seat.waitFor('ready', undefined, T)
      assert.equal(await admin.grant(addrOf(bob)), 0n)
      await granted
      await ready
      const adminHears = collect(admin)
      const seatHears = collect(seat)
      seat.send('from bob')
      admin.send('from alice')
      const got = await heard.next(2)
      assert.deepEqual(got.map((m) => [m.owner, utf8(m.payload)]).sort(), [
        [addrOf(alice), 'from alice'],
        [addrOf(bob), 'from bob'],
      ].sort())
      assert.deepEqual((await adminHears.next(1)).map((m) => [m.owner, utf8(m.payload)]), [[addrOf(bob), 'from bob']])
      assert.deepEqual((await seatHears.next(1)).map((m) => [m.owner, utf8(m.payload)]), [[addrOf(alice), 'from alice']])

      const revoked = seat.waitFor('waiting', undefined, T)
      assert.equal(await admin.revoke(addrOf(bob)), 1n)
      assert.match((await revoked).reason, /revoked/)
      assert.throws(() => seat.send('after the revocation'), StateError)
    })

    test('jam: a closed cohort, granted before the seat joins; publishers hear each other; no audience', { timeout: 60_000 }, async () => {
      const alice = newKey()
      const bob = newKey()
      const cohort = { topic: topicName('jam'), binding: 'mnemonic', admin: addrOf(alice), closed: true }
      const fields = ['address', 'identifier', 'payload']
      const admin = track(client(A).publish(cohort, alice, { fields }))
      await admin.ready(T)
      await admin.setRoster([addrOf(bob)])
      const seat = track(client(B).publish(cohort, bob, { fields }))
      await seat.ready(T)
      const adminHears = collect(admin)
      const seatHears = collect(seat)
      seat.send('bob plays')
      admin.send('alice plays')
      assert.equal(utf8((await adminHears.next(1))[0].payload), 'bob plays')
      const s = (await seatHears.next(1))[0]
      assert.equal(utf8(s.payload), 'alice plays')
      assert.equal(s.owner, addrOf(alice))

      const listener = client(B).subscribe(cohort)
      const e = await listener.ready(T).catch((err) => err)
      assert.ok(e instanceof HttpError && e.status === 400, `a subscriber on a closed cohort: ${e}`)
      assert.match(e.message, /closed cohort/)
    })

    test('jam: a seat that joins before its grant waits, unadmitted, and is admitted once granted', { timeout: 60_000 }, async () => {
      const alice = newKey()
      const bob = newKey()
      const cohort = { topic: topicName('jam-reclaim'), binding: 'anchor', admin: addrOf(alice), closed: true }
      const admin = track(client(A).publish(cohort, alice))
      await admin.ready(T)
      // The seat on the admin's node: the node hears the grant the admin posts there.
      const seat = track(client(A).publish(cohort, bob))
      const auths = []
      seat.on('auth', (c) => auths.push(c))
      const w = await seat.waitFor('waiting', undefined, T)
      assert.match(w.reason, /roster/) // Rev 8: a silent seat waits for a roster naming it, as a spectator does
      const ready = seat.waitFor('ready', undefined, T)
      await admin.grant(addrOf(bob))
      await ready
      // The roster naming bob reaches the silent stream (the broker's cue)
      // and the session: the client sends its AUTH then, once.
      assert.equal(auths.length, 1, `AUTHs: ${auths.length}`)
      const heard = collect(admin)
      seat.send('admitted')
      assert.equal(utf8((await heard.next(1))[0].payload), 'admitted')
    })

    test('group-chat: anyone attached publishes as itself, no AUTH; authors by recoveredPubKey', { timeout: 60_000 }, async () => {
      const alice = newKey()
      const bob = newKey()
      const carol = newKey()
      const cohort = { topic: topicName('chat'), binding: 'mnemonic', admin: addrOf(alice), publishers: 'all' }
      const fields = ['recoveredPubKey', 'payload']
      const b = track(client(A).publish(cohort, bob, { fields }))
      const c = track(client(B).publish(cohort, carol, { fields }))
      let auths = 0
      b.on('auth', () => auths++)
      c.on('auth', () => auths++)
      await Promise.all([b.ready(T), c.ready(T)])
      const bHears = collect(b)
      const cHears = collect(c)
      b.send('hi from bob')
      c.send('hi from carol')
      assert.deepEqual((await bHears.next(1)).map((m) => [m.owner, utf8(m.payload)]), [[addrOf(carol), 'hi from carol']])
      assert.deepEqual((await cHears.next(1)).map((m) => [m.owner, utf8(m.payload)]), [[addrOf(bob), 'hi from bob']])
      assert.equal(auths, 0)
    })

    test('implicit owner binding (a live MIC): topic keccak256(owner)', { timeout: 60_000 }, async () => {
      const dave = newKey()
      const cohort = { topic: ownerTopic(addrOf(dave)), binding: 'owner' }
      const sub = track(client(B).subscribe(cohort, { fields: ['recoveredPubKey', 'payload'] }))
      await sub.ready(T)
      const heard = collect(sub)
      const pub = track(client(A).publish(cohort, dave))
      await pub.ready(T)
      pub.send('mic check')
      const [m] = await heard.next(1)
      assert.deepEqual([m.owner, utf8(m.payload)], [addrOf(dave), 'mic check'])
    })

    test('implicit soc_id binding: a mined owner, the topic its SOC id', { timeout: 60_000 }, async () => {
      // keccak256(topic ‖ owner) shares its first 16 bits with the topic (mined once).
      const erin = new PrivateKey('6e2ff1b1f2ac2fb0b1a3c06c59c6a4a2d6aa6f2f58b3f2d3c09b8b8d6b1e2a01')
      const cohort = { topic: 'd8acedca930496175c850d1ada4937f4270aaa0af2f910228c0832d3992f381d', binding: 'soc_id' }
      const sub = track(client(B).subscribe(cohort, { fields: ['recoveredPubKey', 'payload'] }))
      await sub.ready(T)
      const heard = collect(sub)
      const pub = track(client(A).publish(cohort, erin))
      await pub.ready(T)
      pub.send(`soc_id ${Date.now()}`)
      const [m] = await heard.next(1)
      assert.equal(m.owner, addrOf(erin))
      assert.match(utf8(m.payload), /^soc_id /)
    })

    test('implicit anchor binding and the GSOC session: the topic is the SOC address', { timeout: 60_000 }, async () => {
      const frank = newKey()
      const id = new Uint8Array(randomBytes(32))
      const topic = anchorTopic(id, addrOf(frank))
      const anchor = { topic, binding: 'anchor' }
      const gsoc = { topic }
      const sub = track(client(B).subscribe(anchor))
      const gsub = track(client(B).subscribe(gsoc))
      await Promise.all([sub.ready(T), gsub.ready(T)])
      const heard = collect(sub)
      const gheard = collect(gsub)
      const pub = track(client(A).publish(anchor, frank, { id }))
      await pub.ready(T)
      pub.send('anchored')
      assert.equal(utf8((await heard.next(1))[0].payload), 'anchored')
      // The GSOC subscriber is on the same cohort: signature ‖ span ‖ payload.
      const g = (await gheard.next(1))[0]
      assert.equal(utf8(g.payload), 'anchored')
      assert.equal(g.signature.length, 65)

      const gpub = track(client(A).publish(gsoc, frank, { id }))
      await gpub.ready(T)
      gpub.send('gsoc says')
      assert.equal(utf8((await heard.next(2))[1].payload), 'gsoc says')
    })

    test('a publisher cut off reconnects with backoff, sends a new AUTH and goes on at its next index', { timeout: 90_000 }, async () => {
      const alice = newKey()
      const cohort = { topic: topicName('pub-reconnect'), binding: 'feed', admin: addrOf(alice) }
      const sub = track(client(B).subscribe(cohort))
      await sub.ready(T)
      const heard = collect(sub)
      const proxy = await startProxy(A.api)
      try {
        const pub = track(new BpsClient({ api: proxy.url, peer }).publish(cohort, alice, { reconnect: { initialDelay: 100, maxDelay: 500 } }))
        await pub.ready(T)
        for (let i = 0; i < 3; i++) pub.send(`before ${i}`)
        await heard.next(3)
        const dropped = pub.waitFor('disconnect', undefined, T)
        proxy.cut(true)
        const d = await dropped
        assert.ok(d.retry)
        assert.throws(() => pub.send('while away'), StateError)
        const authed = pub.waitFor('auth', undefined, T)
        proxy.resume()
        const a = await authed
        await pub.ready(T)
        assert.equal(a.challenge, pub.challenge, 'the AUTH under the new stream\'s challenge')
        assert.equal(pub.index, 3n, 'goes on at its next index')
        for (let i = 3; i < 5; i++) pub.send(`after ${i}`)
        const got = await heard.next(5)
        assert.deepEqual(got.map((m) => m.index), [0n, 1n, 2n, 3n, 4n])
      } finally {
        await proxy.close()
      }
    })

    test('gap: what a cut-off subscriber missed of a live-only feed is reported as a gap, never skipped silently', { timeout: 90_000 }, async () => {
      const alice = newKey()
      const cohort = { topic: topicName('gap'), binding: 'feed', admin: addrOf(alice) }
      const pub = track(client(A).publish(cohort, alice))
      await pub.ready(T)
      const proxy = await startProxy(B.api)
      try {
        const sub = track(new BpsClient({ api: proxy.url, peer }).subscribe(cohort, { reconnect: { initialDelay: 100, maxDelay: 500 } }))
        await sub.ready(T)
        const heard = collect(sub)
        pub.send('live 0')
        await heard.next(1)
        const dropped = sub.waitFor('disconnect', undefined, T)
        proxy.cut(true)
        await dropped
        pub.send('live 1')
        pub.send('live 2')
        const gap = sub.waitFor('gap', undefined, 30_000)
        const back = sub.waitFor('ready', undefined, T)
        proxy.resume()
        await back
        pub.send('live 3')
        const g = await gap
        assert.deepEqual([g.addr, g.from, g.to], [addrOf(alice), 1n, 2n])
        const got = await heard.next(2, 30_000)
        assert.deepEqual(got.map((m) => [m.index, utf8(m.payload)]), [[0n, 'live 0'], [3n, 'live 3']])
      } finally {
        await proxy.close()
      }
    })

    // How long the first persistent updates may take: the dev cluster says
    // it runs once every node can upload and store, light ones included.
    // A light node's uploads go out through bee's pusher behind what the
    // suite's earlier tests persisted (1.2–2.4 s an update, docs/api.md).
    const persistWait = fullNode ? 30_000 : 60_000
    test('persistence and recovery: a subscriber cut off resumes at its cursor; what it missed is recovered from storage', { timeout: 120_000 }, async () => {
      await usableStamp(A)
      const alice = newKey()
      const cohort = { topic: topicName('persist'), binding: 'feed', admin: addrOf(alice) }
      // Another node's batch is not A's to stamp with: bee's 404, before any socket.
      const foreign = client(A).publish(cohort, alice, { postageBatch: B.batch, reconnect: false })
      const e = await foreign.ready(T).catch((err) => err)
      assert.ok(e instanceof HttpError && e.status === 404, `a foreign batch: ${e}`)
      assert.match(e.hint, /GET \/stamps/)

      const pub = track(client(A).publish(cohort, alice, { postageBatch: A.batch }))
      pub.on('close', (e) => e.error && console.log(`# the persistent publisher closed: ${e.error.message}`))
      await pub.ready(T)
      const proxy = await startProxy(B.api)
      try {
        const sub = track(new BpsClient({ api: proxy.url, peer }).subscribe(cohort, { reconnect: { initialDelay: 100, maxDelay: 500 } }))
        await sub.ready(T)
        const heard = collect(sub, pub)
        for (let i = 0; i < 3; i++) pub.send(`persistent ${i}`)
        await heard.next(3, persistWait)

        // The connection drops and stays down while 3…5 are published.
        const dropped = sub.waitFor('disconnect', undefined, T)
        proxy.cut(true)
        const d = await dropped
        assert.ok(d.retry, `retries after ${d.error}`)
        for (let i = 3; i < 6; i++) pub.send(`persistent ${i}`)
        await stored(cl.broker, alice, cohort, 5n)
        assert.equal(sub.cursor, 3n)
        const recovered = sub.waitFor('recovered', undefined, 30_000)
        proxy.resume()
        await sub.ready(T)
        pub.send('persistent 6')
        const r = await recovered
        assert.deepEqual([r.addr, r.from, r.to], [addrOf(alice), 3n, 5n])
        const got = await heard.next(7, 30_000)
        assert.deepEqual(
          got.map((m) => [m.index, m.recovered, utf8(m.payload)]),
          [0, 1, 2, 3, 4, 5, 6].map((i) => [BigInt(i), i >= 3 && i <= 5, `persistent ${i}`]),
        )
      } finally {
        await proxy.close()
      }

      // A late subscriber resuming at 0 recovers the whole feed at the next live update.
      const late = track(client(B).subscribe(cohort, { resume: 0 }))
      await late.ready(T)
      const lateHeard = collect(late)
      pub.send('persistent 7')
      const all = await lateHeard.next(8, 30_000)
      assert.deepEqual(all.map((m) => m.index), [0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n])
    })

    test('history: a receiver of a history cohort gets each feed from index 0, recovered from storage', { timeout: 150_000 }, async () => {
      await usableStamp(A)
      const alice = newKey()
      const cohort = { topic: topicName('history'), binding: 'feed', admin: addrOf(alice), history: true }
      const live = client(A).publish(cohort, alice, { reconnect: false })
      const refused = await live.ready(T).catch((err) => err)
      assert.ok(refused instanceof HttpError && refused.status === 400 && refused.reasons.some((r) => r.field === 'swarm-postage-batch-id'), `a live-only publisher: ${refused}`)
      const pub = track(client(A).publish(cohort, alice, { postageBatch: A.batch }))
      await pub.ready(T)
      for (let i = 0; i < 3; i++) pub.send(`history ${i}`)
      await stored(cl.broker, alice, cohort, 2n, persistWait)
      const late = track(client(B).subscribe(cohort))
      await late.ready(T)
      const heard = collect(late, pub)
      pub.send('history 3')
      const got = await heard.next(4, 30_000)
      assert.deepEqual(got.map((m) => [m.index, m.recovered, utf8(m.payload)]), [0, 1, 2, 3].map((i) => [BigInt(i), i < 3, `history ${i}`]))
    })

    test('typed errors: 409 without an admin stream of that challenge, 1007 for an invalid frame (with the node\'s reason), no reconnect', { timeout: 60_000 }, async () => {
      const alice = newKey()
      const cohort = { topic: topicName('errors'), binding: 'anchor', admin: addrOf(alice) }
      const e = await client(B).postService(cohort, alice, { kind: 'ROSTER', index: 0n, publishers: [] }, 'ee'.repeat(32)).catch((err) => err)
      assert.ok(e instanceof HttpError && e.status === 409, `${e}`)
      assert.match(e.nodeMessage, /no admin stream/)

      const pub = track(client(A).publish(cohort, alice))
      await pub.ready(T)
      const closed = pub.waitFor('close', undefined, T)
      pub['socket'].sendBinary(new Uint8Array(32 + 65 + 8 + 1)) // not a valid publication
      const c = (await closed).error
      assert.ok(c instanceof CloseError && c.code === 1007, `${c}`)
      assert.ok(c.nodeReason && c.nodeReason.length > 0)
      assert.equal(c.retryable, false)
    })
  })
}

/**
 * Resolves once node serves update index of owner's feed (GET /soc). Ask a
 * full node (the broker), never a light reader: bee's retrieval skips, for a
 * minute, each peer that failed to deliver a chunk, so a light node asked
 * while the upload is still being pushed answers 404 at once for a minute —
 * to this wait, and to the recovery that follows it. A full node answers from
 * its own store once the push or its neighbour's sync reaches it.
 */
async function stored(node, key, cohort, index, timeoutMs = 30_000) {
  const id = Buffer.from(feedId(topicBytes(cohort.topic), index)).toString('hex')
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const res = await fetch(`${node.api}/soc/${addrOf(key)}/${id}`, { signal: AbortSignal.timeout(5_000) }).catch(() => undefined)
    if (res?.ok) return
    if (Date.now() > deadline) throw new Error(`update ${index} not stored within ${timeoutMs} ms: ${res?.status}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}
