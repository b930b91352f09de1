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
