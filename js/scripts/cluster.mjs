// Starts a `bee-bps dev` cluster of real bee nodes on loopback, for the
// end-to-end tests and the demo, and stops it. The binary is the one
// `make run` builds (bin/bee-bps-dev, with the dev ldflags that let
// pushsync store on loopback), or $BPS_DEV_BIN.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
export const devBin = process.env.BPS_DEV_BIN || join(repo, 'bin/bee-bps-dev')

/**
 * Starts a cluster: the broker and nodes-1 more nodes, full or light (light:
 * and one more full node, `storer`, listed last, which stores their uploads);
 * resolves once the dev command says it runs (every node reached the broker
 * and can upload and store) with the info file's contents and stop().
 */
export async function startCluster({ nodes = 3, fullNode = true, args = [], timeoutMs = 90_000 } = {}) {
  if (!existsSync(devBin)) throw new Error(`${devBin} is missing: \`make js-test\` builds it (or set BPS_DEV_BIN)`)
  const dir = mkdtempSync(join(tmpdir(), 'bps-js-'))
  const infoFile = join(dir, 'cluster.json')
  const child = spawn(
    devBin,
    ['dev', '--info-file', infoFile, '--api-addr', '127.0.0.1:0', '--nodes', String(nodes), `--full-node=${fullNode}`, '--verbosity', '0', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  // The cluster never outlives the tests, however they end.
  const killer = () => child.kill('SIGKILL')
  process.on('exit', killer)
  let output = ''
  const exited = new Promise((res) => child.on('exit', (code, signal) => res({ code, signal })))
  const running = new Promise((res) => {
    const watch = (chunk) => {
      output += chunk
      if (output.includes('dev cluster running')) res()
    }
    child.stdout.on('data', watch)
    child.stderr.on('data', watch)
  })
  let timer
  const timeout = new Promise((_, rej) => {
    timer = setTimeout(() => rej(new Error(`bee-bps dev not running within ${timeoutMs} ms:\n${output}`)), timeoutMs)
  })
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const t = setTimeout(() => child.kill('SIGKILL'), 30_000)
      await exited
      clearTimeout(t)
    }
    process.off('exit', killer)
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await Promise.race([
      running,
      timeout,
      exited.then(({ code, signal }) => {
        throw new Error(`bee-bps dev exited (${code ?? signal}):\n${output}`)
      }),
    ])
  } catch (e) {
    await stop()
    throw e
  } finally {
    clearTimeout(timer)
  }
  const info = JSON.parse(readFileSync(infoFile, 'utf8'))
  return { ...info, broker: info.nodes[0], stop, output: () => output }
}

/** Resolves once node's postage batch is usable (GET /stamps), within timeoutMs. */
export async function usableStamp(node, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${node.api}/stamps`)
      last = `${res.status} ${await res.text()}`
      if (res.ok) {
        const s = JSON.parse(last.slice(4)).stamps ?? []
        if (s.some((b) => b.batchID === node.batch && b.usable)) return
      }
    } catch (e) {
      last = e.message
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`${node.name}: batch ${node.batch} not usable within ${timeoutMs} ms; last answer ${last}`)
}
