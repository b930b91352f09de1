// make demo-web: a dev cluster of real nodes, and the demo room served on
// loopback. Prints the page for the host; the host's page links the page
// for readers. Ctrl-C stops everything.
import { startDemo } from './demo-server.mjs'

const demo = await startDemo({ port: Number(process.env.DEMO_PORT ?? 8080) })
console.log(`\nthe room's host:  ${demo.url}/?node=1\nreaders open the link the host's page shows (node 2), or ${demo.url}/?node=2&admin=<host address>\nCtrl-C to stop`)
const stop = async () => {
  await demo.stop()
  process.exit(0)
}
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
process.on('SIGHUP', stop)
