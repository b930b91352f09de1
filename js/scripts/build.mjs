// Builds dist/: ESM (dist/esm), CommonJS (dist/cjs) and type declarations
// (dist/types) with tsc; each JavaScript tree gets a package.json naming its
// module type, so that Node reads .js files in either tree correctly.
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
rmSync('dist', { recursive: true, force: true })
for (const project of ['tsconfig.json', 'tsconfig.cjs.json', 'tsconfig.types.json']) {
  execFileSync(process.execPath, [tsc, '-p', project], { stdio: 'inherit' })
}
for (const [dir, type] of [['dist/esm', 'module'], ['dist/cjs', 'commonjs']]) {
  mkdirSync(dir, { recursive: true })
  writeFileSync(`${dir}/package.json`, JSON.stringify({ type }) + '\n')
}

// The browser bundles: each one ES module a page loads from a script tag
// or an import map, without a bundler — the client and what it uses of
// bee-js (keys, SOC, BMT), the browser platform module in place of Node's
// (package.json "browser"), minified. bee-js's HTTP stack (axios, debug),
// which the client never calls, is left out (scripts/browser-stubs).
//
// dist/browser/bps.js (the ./browser export, the default, ~200 KiB) signs
// with @noble/curves: package.json "browser" puts the client's stand-in
// for the WebAssembly signer in its place, as for any other bundler.
// dist/browser/bps.wasm.js (./browser-wasm, opt-in, ~1.8 MiB) signs with
// tiny-secp256k1's WebAssembly (src/wasmsign.ts), carried inline: the same
// bytes in about a third of the time, for a page that publishes at high
// rates or wants the lowest latency. scripts/browser-wasm replaces the
// stand-in and tiny-secp256k1's loader (which imports the .wasm file as a
// module, what only some bundlers do). Nothing is fetched when a page
// loads either.
const esbuild = await import('esbuild')
const inlineWasm = {
  name: 'inline-wasm',
  setup(build) {
    const here = new URL('./browser-wasm/', import.meta.url).pathname
    build.onResolve({ filter: /^\.\/wasmsign(\.browser)?\.js$/ }, (a) => (a.importer.includes('/dist/esm/') ? { path: here + 'wasmsign.mjs' } : undefined))
    build.onResolve({ filter: /^\.\/wasm_loader(\.browser)?\.js$/ }, (a) => (a.importer.includes('/tiny-secp256k1/') ? { path: here + 'loader.mjs' } : undefined))
  },
}
for (const [outfile, plugins] of [
  ['dist/browser/bps.js', []],
  ['dist/browser/bps.wasm.js', [inlineWasm]],
]) {
  const result = await esbuild.build({
    entryPoints: ['dist/esm/index.js'],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    keepNames: true, // error classes keep their names (err.name)
    legalComments: 'eof',
    outfile,
    metafile: true,
    logLevel: 'warning',
    alias: { axios: './scripts/browser-stubs/axios.mjs', debug: './scripts/browser-stubs/debug.mjs' },
    loader: { '.wasm': 'binary' },
    plugins,
  })
  const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0)
  console.log(`${outfile}: ${(bytes / 1024).toFixed(1)} KiB`)
}
