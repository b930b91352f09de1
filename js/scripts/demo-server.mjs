// The demo room: bundles demo/app.mjs with the client for browsers
// (esbuild), serves it on loopback, and starts
// a dev cluster that lets the page's origin in.
//
// The page reaches each node through this server (/node/<i>/…, HTTP and
// WebSocket alike): the node's /pubsub routes send no CORS headers, so a
// page on another origin could open sessions (a WebSocket is not subject
// to CORS; the node checks the Origin) but not post the admin's roster.
import { readFileSync } from 'node:fs'
import { createServer, request } from 'node:http'
import net from 'node:net'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as esbuild from 'esbuild'
import { startCluster } from './cluster.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

/** Bundles the demo's script for browsers, as a dApp's bundler would. */
export async function bundle() {
  const out = await esbuild.build({
    entryPoints: [join(root, 'demo/app.mjs')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    logLevel: 'warning',
    // The client as a dApp's bundler finds it: by its name, through its
    // package.json (its "browser" field swaps the Node platform module).
    alias: { '@ethersphere/bps': root },
  })
  return out.outputFiles[0].contents
}

/** Serves the page, starts the cluster; resolves with the page's URL, the cluster and stop(). */
export async function startDemo({ port = 0, clusterArgs = [] } = {}) {
  const app = await bundle()
  const html = readFileSync(join(root, 'demo/index.html'))
  let config = '{}'
  let apis = []
  // /node/<i>/rest → node i's API, rest; undefined if not such a path.
  const route = (url) => {
    const m = /^\/node\/(\d+)(\/.*)$/.exec(url)
    const api = m && apis[Number(m[1])]
    return api ? { target: new URL(api), path: m[2] } : undefined
  }
  const server = createServer((req, res) => {
    const r = route(req.url)
    if (r) {
      const up = request({ host: r.target.hostname, port: r.target.port, method: req.method, path: r.path, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode, ur.headers)
        ur.pipe(res)
      })
      up.on('error', (e) => res.writeHead(502).end(e.message))
      req.pipe(up)
      return
    }
    const path = new URL(req.url, 'http://x').pathname
    const send = (type, body) => res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(body)
    if (path === '/' || path === '/index.html') send('text/html; charset=utf-8', html)
    else if (path === '/app.js') send('text/javascript; charset=utf-8', app)
    else if (path === '/config.json') send('application/json', config)
    else res.writeHead(404).end('not found')
  })
  server.on('upgrade', (req, socket, head) => {
    const r = route(req.url)
    if (!r) return socket.destroy()
    const up = net.connect(Number(r.target.port), r.target.hostname, () => {
      const lines = [`${req.method} ${r.path} HTTP/1.1`]
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`)
      up.write(lines.join('\r\n') + '\r\n\r\n')
      up.write(head)
      socket.pipe(up).pipe(socket)
    })
    const drop = () => (socket.destroy(), up.destroy())
    up.on('error', drop).on('close', drop)
    socket.on('error', drop).on('close', drop)
  })
  await new Promise((r) => server.listen(port, '127.0.0.1', r))
  const url = `http://127.0.0.1:${server.address().port}`
  let cluster
  try {
    cluster = await startCluster({ args: ['--cors-allowed-origins', url, ...clusterArgs] })
  } catch (e) {
    server.close()
    throw e
  }
  apis = cluster.nodes.map((n) => n.api)
  config = JSON.stringify({ peer: cluster.broker.underlays[0], nodes: cluster.nodes.map((n, i) => ({ name: n.name, api: `${url}/node/${i}` })) })
  return {
    url,
    cluster,
    stop: async () => {
      server.close()
      await cluster.stop()
    },
  }
}
