// Serves an example page (examples/<name>/) and the client's browser bundle
// (dist/browser/bps.js, as ./bps.js beside it) on a loopback port of its
// own: the dApp's origin, which `bee-bps dev` lets in by default. With a
// dev cluster's info file (make run writes bps-dev.json), prints the page's
// address with the nodes filled in.
//
//   npm run build && node scripts/serve-example.mjs worker [../bps-dev.json] [port=8090]
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { dirname, extname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css' }

/** Serves examples/<name> and the bundle; resolves with the origin's URL and close(). */
export async function serveExample(name, port = 0) {
  const dir = join(root, 'examples', name)
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname
    const file = path === '/bps.js' ? join(root, 'dist/browser/bps.js') : join(dir, normalize(path === '/' ? '/index.html' : path))
    if (path !== '/bps.js' && !file.startsWith(dir + '/')) return res.writeHead(404).end()
    let body
    try {
      body = readFileSync(file)
    } catch {
      return res.writeHead(404).end()
    }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' }).end(body)
  })
  await new Promise((r) => server.listen(port, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [name = 'worker', info, port = '8090'] = process.argv.slice(2)
  const site = await serveExample(name, Number(port))
  let url = `${site.url}/`
  if (info) {
    const [broker, A, B] = JSON.parse(readFileSync(info, 'utf8')).nodes
    url += `?api=${encodeURIComponent(A.api)}&sub=${encodeURIComponent((B ?? A).api)}&peer=${broker.overlay}`
  }
  console.log(`${name}: ${url}\nCtrl-C to stop`)
}
