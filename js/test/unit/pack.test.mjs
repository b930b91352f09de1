// The package a registry ships: `npm pack` holds the ESM, CommonJS, types
// and browser builds, and every path package.json exports is in it.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'

test('npm pack ships every build and every exported path', () => {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const [pack] = JSON.parse(execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { encoding: 'utf8' }))
  const files = new Set(pack.files.map((f) => f.path))
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'))
  const paths = []
  const walk = (v) => (typeof v === 'string' ? paths.push(v.replace(/^\.\//, '')) : Object.values(v).forEach(walk))
  walk(pkg.exports)
  for (const p of [...paths, pkg.main.replace(/^\.\//, ''), pkg.types.replace(/^\.\//, ''), 'README.md', 'dist/esm/platform.browser.js', 'dist/cjs/platform.browser.js', 'dist/esm/wasmsign.browser.js', 'dist/cjs/wasmsign.browser.js']) {
    assert.ok(files.has(p), `${p} is not in the package`)
  }
  // Nothing but the builds, the README and package.json.
  for (const f of files) assert.match(f, /^(dist\/|README\.md$|package\.json$)/, `${f} should not be shipped`)
  // The browser bundles are self-contained modules: no bare imports left, no .wasm to fetch.
  for (const f of ['dist/browser/bps.js', 'dist/browser/bps.wasm.js']) {
    const bundle = readFileSync(f, 'utf8')
    assert.doesNotMatch(bundle, /\bfrom\s*["'](?!\.)[^"']+["']|\bimport\(["'](?!\.)/, `a bare import in ${f}`)
    assert.doesNotMatch(bundle, /axios\.create|AxiosHeaders/, `axios in ${f}`)
    assert.doesNotMatch(bundle, /\.wasm["']/, `a .wasm file named in ${f}`)
  }
})
