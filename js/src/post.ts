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
  /** The admin's key or signer: the service SOC is signed here. */
  key: PrivateKey | BytesLike | Signer
  message: ServiceMessage
}

/**
 * Signs a service message as the next update of the admin's service feed and
 * posts it to POST /pubsub/{topic}/service, for the node to relay on the
 * admin's publisher stream; the node needs an admin session of the cohort
 * open on it (409 otherwise). Resolves with the index the node relayed;
 * rejects with an HttpError carrying the node's reason (403 not the
 * admin's, 409 no admin session or a stale index, …).
 */
export async function postService(o: PostServiceOptions): Promise<bigint> {
  const c = resolveCohort(o.cohort)
  if (c.binding === undefined || !c.admin) throw new BpsError('a cohort without an admin has no service feed')
  const body = await serviceBodyWith(toSigner(o.key), c.topic, o.message)
  const url = endpoint(o.api, c.topic, '/service', specQuery(c, o.peer), false)
  let res: Response
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: body as Uint8Array<ArrayBuffer> })
  } catch (e) {
    throw new BpsError(`post service: ${(e as Error).message}`, 'is the node running, and its API at this URL?')
  }
  const text = await res.text()
  if (res.status !== 202) throw HttpError.fromBody('post service', res.status, text, res.headers.get('retry-after'))
  let index: bigint
  try {
    index = frameUint(parseFrame(text).index, 'index')
  } catch {
    throw new BpsError(`post service: 202 without the relayed index: ${text}`)
  }
  if (index !== o.message.index) throw new BpsError(`post service: the node relayed index ${index}, not ${o.message.index}`)
  return index
}
