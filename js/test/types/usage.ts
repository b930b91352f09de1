// Compiled (not run) by `npm test` against the published declarations
// (dist/types): the README's uses type-check as a dApp writes them.
import { PrivateKey } from '@ethersphere/bee-js'
import { BpsClient, CloseError, Cohort, FeedCursors, HttpError, Message, ServiceEvent, Session, SignError, StaleEvent } from '@ethersphere/bps'

export async function usage(key: PrivateKey): Promise<void> {
  const client = new BpsClient({ api: 'http://127.0.0.1:1633', peer: '/ip4/127.0.0.1/tcp/1634/p2p/Qm' })
  const cohort: Cohort = { topic: 'my-stream', binding: 'feed', admin: key.publicKey().address() }
  const reader: Session = client.subscribe(cohort, { resume: 42n, fields: ['index', 'payload'] })
  reader.on('message', (m: Message) => console.log(m.index, m.owner, m.recovered, m.payload?.length))
  reader.on('service', (s: ServiceEvent) => console.log(s.kind, s.index + 1n, s.publishers.join()))
  reader.on('gap', (g) => console.log(g.addr, g.from, g.to))
  reader.on('close', ({ error }) => {
    if (error instanceof CloseError) console.log(error.code, error.reason, error.nodeReason, error.endOfStream)
    if (error instanceof HttpError) console.log(error.status, error.reasons, error.retryAfter)
  })
  await reader.ready(10_000)
  const stream = client.publish(cohort, key, { postageBatch: 'aa'.repeat(32), index: '7', feedCursors: new FeedCursors() })
  stream.on('challenge', (c) => console.log(c.challenge, c.seq, c.broker))
  stream.on('stale', (e: StaleEvent) => console.log(e.kind, e.index, e.resent))
  await stream.ready()
  try {
    const sent = stream.send('hello')
    console.log(sent.index, sent.address, stream.index, stream.challenge)
  } catch (e) {
    if (e instanceof SignError) console.log('not signed:', e.message)
  }
  await stream.publish('world')
  await stream.grant('11'.repeat(20))
  await stream.endStream()
  await client.postService({ topic: 'room', binding: 'mnemonic', admin: key.publicKey().address(), closed: true }, key, { kind: 'ROSTER', index: 0n, publishers: [] }, stream.challenge!)
  await stream.close()
}
