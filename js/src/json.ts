// The node's text frames, parsed with their integers exact. An index is a
// uint64: the node writes it as a JSON number today (which JSON.parse would
// round above 2^53) and will write it as a decimal string; both are read as
// a bigint.

const integerKeys = /"(index|from|to|top)"(\s*):(\s*)(-?\d+)(?=\s*[,}\]])/g

/**
 * Parses one text frame; the values of "index", "from", "to" and "top" that
 * are integers become decimal strings before JSON.parse sees them (a key
 * inside a JSON string has its quotes escaped, so it never matches).
 */
export function parseFrame(text: string): Record<string, unknown> {
  const v = JSON.parse(text.replace(integerKeys, '"$1"$2:$3"$4"'))
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new SyntaxError('not a JSON object')
  return v as Record<string, unknown>
}

/** A uint64 field of a parsed frame: a decimal string or a safe JSON number. */
export function frameUint(v: unknown, what: string): bigint {
  if (typeof v === 'string' && /^\d+$/.test(v)) return BigInt(v)
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v)
  throw new SyntaxError(`${what}: ${JSON.stringify(v)} is not an unsigned integer`)
}

export function frameString(v: unknown, what: string): string {
  if (typeof v !== 'string') throw new SyntaxError(`${what}: ${JSON.stringify(v)} is not a string`)
  return v
}
