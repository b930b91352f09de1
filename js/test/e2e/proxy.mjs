// A TCP proxy on loopback in front of a node's API, which a test can cut
// (every connection through it dropped, as a network failure would) and
// hold (new connections refused) to make a session lose its connection.
import net from 'node:net'

export async function startProxy(target) {
  const { hostname, port } = new URL(target)
  const sockets = new Set()
  let holding = false
  const server = net.createServer((c) => {
    if (holding) {
      c.destroy()
      return
    }
    const u = net.connect(Number(port), hostname)
    sockets.add(c)
    sockets.add(u)
    const drop = () => {
      c.destroy()
      u.destroy()
      sockets.delete(c)
      sockets.delete(u)
    }
    c.on('error', drop).on('close', drop)
    u.on('error', drop).on('close', drop)
    c.pipe(u)
    u.pipe(c)
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    /** Drops every connection; holds new ones off while hold is true. */
    cut(hold) {
      holding = hold
      for (const s of sockets) s.destroy()
      sockets.clear()
    },
    resume() {
      holding = false
    },
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise((r) => server.close(r))
    },
  }
}
