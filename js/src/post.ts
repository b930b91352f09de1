import { PrivateKey } from '@ethersphere/bee-js'
import { BytesLike } from './bytes.js'
import { BpsError, HttpError } from './errors.js'
import { frameUint, parseFrame } from './json.js'
import { serviceBodyWith, ServiceMessage } from './service.js'
import { Cohort, endpoint, resolveCohort, specQuery } from './spec.js'
import { Signer, toSigner } from './soc.js'

export interface PostServiceOptions {
  api: string
  peer: string
  cohort: Cohort
  /** The admin's key or signer: the chunk is signed here. */
  key: PrivateKey | BytesLike | Signer
  /** The challenge of the admin's stream on this node the message travels on: its publishing session's (Session.challenge). */
  challenge: BytesLike
  message: ServiceMessage
}

/**
 * Signs a ROSTER or EOS chunk under the challenge of the admin's stream and
 * posts it to POST /pubsub/{topic}/service, for the node to send on that
 * stream. The node needs the admin's publishing session open on it with
 * that challenge: 409 "no admin stream with this challenge" otherwise (the
 * stream is gone: sign again under its session's new challenge). Resolves
 * with the index once the node wrote it; rejects with an HttpError carrying
 * the node's reason.
 */
export async function postService(o: PostServiceOptions): Promise<bigint> {
  const c = resolveCohort(o.cohort)
  if (c.binding === undefined || !c.admin) throw new BpsError('a cohort without an admin has no service feed')
  const body = await serviceBodyWith(toSigner(o.key), c.topic, o.challenge, o.message)
  const url = endpoint(o.api, c.topic, '/service', specQuery(c, o.peer), false)
  let res: Response
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  } catch (e) {
    throw new BpsError(`post service: ${(e as Error).message}`, 'is the node running, and its API at this URL?')
  }
  const text = await res.text()
  if (res.status !== 200 && res.status !== 202) throw HttpError.fromBody('post service', res.status, text, res.headers.get('retry-after'))
  // The node may echo the index; if it does, it must be ours.
  let echoed: bigint | undefined
  try {
    echoed = frameUint(parseFrame(text).index, 'index')
  } catch {
    echoed = undefined
  }
  if (echoed !== undefined && echoed !== o.message.index) throw new BpsError(`post service: the node wrote index ${echoed}, not ${o.message.index}`)
  return o.message.index
}
