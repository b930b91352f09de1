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

// The browser bundle (dist/browser/bps.js): one ES module a page loads from
// a script tag or an import map, without a bundler — the client and what
// it uses of bee-js (keys, SOC, BMT), the browser platform module in place
// of Node's (package.json "browser"), minified. bee-js's HTTP stack (axios,
// debug), which the client never calls, is left out (scripts/browser-stubs).
const esbuild = await import('esbuild')
const result = await esbuild.build({
  entryPoints: ['dist/esm/index.js'],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  keepNames: true, // error classes keep their names (err.name)
  legalComments: 'eof',
  outfile: 'dist/browser/bps.js',
  metafile: true,
  logLevel: 'warning',
  alias: { axios: './scripts/browser-stubs/axios.mjs', debug: './scripts/browser-stubs/debug.mjs' },
})
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0)
console.log(`dist/browser/bps.js: ${(bytes / 1024).toFixed(1)} KiB`)
