import { PrivateKey } from '@ethersphere/bee-js'
import { BytesLike } from './bytes.js'
import { BpsError, HttpError } from './errors.js'
import { postService } from './post.js'
import { ServiceMessage } from './service.js'
import { Session, SessionOptions } from './session.js'
import { Signer } from './soc.js'
import { Cohort } from './spec.js'

export interface ClientOptions {
  /** The node's API, e.g. http://127.0.0.1:1633. */
  api: string
  /** The broker: its overlay in hex (the node dials it through its addressbook; stable across the broker's restarts), or an underlay multiaddr with /p2p/ (the node dials it). */
  peer: string
}

type Extra = Omit<SessionOptions, 'api' | 'peer' | 'cohort' | 'key'>

/** A node and a broker: opens sessions on cohorts there and posts the admin's service messages. */
export class BpsClient {
  readonly api: string
  readonly peer: string

  constructor(o: ClientOptions) {
    this.api = o.api
    this.peer = o.peer
  }

  /** A receiving session (a closed cohort has no audience: the node refuses it). */
  subscribe(cohort: Cohort, opts: Omit<Extra, 'index' | 'postageBatch' | 'id'> = {}): Session {
    return new Session({ ...opts, api: this.api, peer: this.peer, cohort })
  }

  /**
   * A session publishing as key's address, signing here, or as a signer's
   * (a Web Worker's, a wallet's session key: send with session.publish());
   * it also receives the cohort's other publishers.
   */
  publish(cohort: Cohort, key: PrivateKey | BytesLike | Signer, opts: Omit<Extra, 'resume'> = {}): Session {
    return new Session({ ...opts, api: this.api, peer: this.peer, cohort, key })
  }

  /**
   * Posts a ROSTER or EOS signed with the admin's key under challenge, the
   * challenge of the admin's publishing session of the cohort open on this
   * node (Session.challenge); the admin's Session.setRoster, grant, revoke
   * and endStream do this for it.
   */
  postService(cohort: Cohort, adminKey: PrivateKey | BytesLike | Signer, message: ServiceMessage, challenge: BytesLike): Promise<bigint> {
    return postService({ api: this.api, peer: this.peer, cohort, key: adminKey, message, challenge })
  }

  /** The node's topics (GET /pubsub/). */
  async topics(): Promise<{ topics: Record<string, unknown>[]; audience?: Record<string, unknown> }> {
    const res = await fetch(this.api.replace(/\/$/, '') + '/pubsub/')
    const text = await res.text()
    if (!res.ok) throw HttpError.fromBody('list topics', res.status, text, res.headers.get('retry-after'))
    try {
      return JSON.parse(text)
    } catch {
      throw new BpsError(`list topics: not JSON: ${text.slice(0, 200)}`)
    }
  }
}
