// The CommonJS build loads through the package's exports (require by name).
const assert = require('node:assert/strict')
const { test } = require('node:test')

test('require("@ethersphere/bps") loads the CommonJS build', () => {
  const bps = require('@ethersphere/bps')
  assert.equal(typeof bps.BpsClient, 'function')
  assert.equal(typeof bps.Session, 'function')
  assert.equal(Buffer.from(bps.kindId(bps.Kind.AUTH, new Uint8Array(32), new Uint8Array(32), 0n)).length, 32)
})
