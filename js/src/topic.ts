import { Bytes, Topic } from '@ethersphere/bee-js'
import { toBytes } from './bytes.js'
import { ValidationError } from './errors.js'

/**
 * The 32-byte topic a path names, by the node's rule (docs/api.md, "Opening
 * a session"): 64 hex characters (0x optional) are the address; 0x and
 * anything else, or 40 or more hex characters but not 64, look like a
 * mistyped address and are refused; any other string is a name, hashed with
 * keccak256 (bee-js's Topic.fromString).
 */
export function topicBytes(topic: string | Uint8Array | Bytes): Uint8Array {
  if (typeof topic !== 'string') return toBytes(topic, 32, 'topic')
  if (topic.startsWith('0x')) {
    const h = topic.slice(2)
    if (/^[0-9a-fA-F]{64}$/.test(h)) return toBytes(h, 32, 'topic')
    throw new ValidationError(`topic: 0x-prefixed: a topic address is 64 hex characters, got ${h.length}`)
  }
  if (/^[0-9a-fA-F]+$/.test(topic)) {
    if (topic.length === 64) return toBytes(topic, 32, 'topic')
    if (topic.length >= 40) {
      throw new ValidationError(`topic: looks like a hex address but is ${topic.length} characters; a topic address is 64 hex characters`)
    }
  }
  if (topic.length === 0) throw new ValidationError('topic: empty')
  return Topic.fromString(topic).toUint8Array()
}
