// The CommonJS build loads and is the same client.
const assert = require('node:assert/strict')
const { test } = require('node:test')

test('require() loads the CommonJS build', () => {
  const bps = require('../../dist/cjs/index.js')
  assert.equal(typeof bps.BpsClient, 'function')
  assert.equal(typeof bps.Session, 'function')
  assert.equal(Buffer.from(bps.claimDigest(new Uint8Array(32), new Uint8Array(32), 0n)).length, 32)
})
