import { PrivateKey } from '@ethersphere/bee-js'
import { concat, equal, hex, toBytes, uint64BE, utf8 } from './bytes.js'
import { ClaimError } from './errors.js'
import { ClaimEvent } from './frames.js'
import { frameString, frameUint } from './json.js'
import { keccak, ownerOf, signWithKey } from './soc.js'

const claimDomain = utf8('bps-claim:v1')

/** What a claim's digest hashes: "bps-claim:v1" ‖ challenge ‖ broker overlay ‖ uint64BE(index) (SWIP-74). */
export function claimPreimage(challenge: Uint8Array, broker: Uint8Array, index: bigint): Uint8Array {
  return concat(claimDomain, challenge, broker, uint64BE(index))
}

/** The claim digest keccak256(claimPreimage(…)) (bps.ClaimDigest). */
export function claimDigest(challenge: Uint8Array, broker: Uint8Array, index: bigint): Uint8Array {
  return keccak(claimPreimage(challenge, broker, index))
}

/**
 * Answers a claim-request: the digest is derived here from the request's
 * challenge, broker and index — never taken from the node — and signed with
 * key exactly as a SOC digest (signWithKey, as bee's signer: EIP-191 over the
 * keccak256 of what it is given, so it is given the preimage). A request for
 * another address, a malformed one, or one whose digest (if the node still
 * sends it) differs from ours is refused with a ClaimError: signing it could
 * only help a node that is not ours.
 */
export function answerClaim(key: PrivateKey, f: Record<string, unknown>): { signature: string; event: ClaimEvent } {
  const { preimage, event } = prepareClaim(hex(ownerOf(key)), f)
  return { signature: hex(signWithKey(key.toUint8Array(), preimage)), event }
}

/**
 * The checks of answerClaim, for the address own (hex): what to sign (the
 * preimage, signed as a SOC digest is) and the event; a ClaimError if the
 * request is not one to sign.
 */
export function prepareClaim(own: string, f: Record<string, unknown>): { preimage: Uint8Array; event: ClaimEvent } {
  let challenge: Uint8Array, broker: Uint8Array, index: bigint, addr: string
  try {
    challenge = toBytes(frameString(f.challenge, 'challenge'), 32, 'claim-request.challenge')
    broker = toBytes(frameString(f.broker, 'broker'), 32, 'claim-request.broker')
    index = f.index === undefined ? 0n : frameUint(f.index, 'claim-request.index')
    addr = frameString(f.addr, 'claim-request.addr').replace(/^0x/, '').toLowerCase()
  } catch (e) {
    throw new ClaimError(`malformed claim-request: ${(e as Error).message}`)
  }
  if (addr !== own) throw new ClaimError(`claim requested for ${addr}, not for this session's key ${own}`)
  const preimage = claimPreimage(challenge, broker, index)
  const digest = keccak(preimage)
  if (f.digest !== undefined) {
    let theirs: Uint8Array
    try {
      theirs = toBytes(frameString(f.digest, 'digest'), 32, 'claim-request.digest')
    } catch (e) {
      throw new ClaimError(`malformed claim-request: ${(e as Error).message}`)
    }
    if (!equal(theirs, digest)) {
      throw new ClaimError(`the node's claim digest ${hex(theirs)} is not the one its challenge, broker and index make (${hex(digest)}): not signed`)
    }
  }
  return { preimage, event: { addr, broker: hex(broker), challenge: hex(challenge), index, digest: hex(digest) } }
}
