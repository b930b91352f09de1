// The demo room: a spectator-jam (binding mnemonic, an admin). The host's
// page is the admin; every other page is a reader holding a key of its own,
// whose session waits — receiving the room — until the host's roster lets
// it speak. Keys are made here and never leave the page.
import { PrivateKey } from '@ethersphere/bee-js'
import { BpsClient } from '@ethersphere/bps'

const $ = (id) => document.getElementById(id)
const params = new URLSearchParams(location.search)
const config = await (await fetch('config.json')).json()
const node = config.nodes[Number(params.get('node') ?? 1)]
// node.api is this page's server, which passes /node/<i>/… to the node (see scripts/demo-server.mjs).
const room = params.get('room') ?? 'bps-demo-room'

// The page's key: one per tab.
let hexKey = sessionStorage.getItem('bps-demo-key')
if (!hexKey) {
  hexKey = [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, '0')).join('')
  sessionStorage.setItem('bps-demo-key', hexKey)
}
const key = new PrivateKey(hexKey)
const me = key.publicKey().address().toHex()
const host = !params.get('admin')
const admin = params.get('admin') ?? me
const name = params.get('name') ?? (host ? 'host' : `reader ${me.slice(0, 4)}`)

$('room').textContent = room
$('node').textContent = `${node.name} ${node.api}`
$('me').textContent = me
$('name').textContent = name
$('role').textContent = host ? 'host' : 'reader'

const log = (who, text, cls) => {
  const li = document.createElement('li')
  if (cls) li.className = cls
  if (who) {
    const w = document.createElement('span')
    w.className = 'who'
    w.textContent = who
    li.append(w)
  }
  li.append(document.createTextNode(text))
  $('log').append(li)
  $('log').scrollTop = $('log').scrollHeight
}
const setState = (s, title = '') => {
  $('state').textContent = s
  $('state').className = `state ${s}`
  $('state').title = title
  const may = s === 'ready'
  $('text').disabled = $('send').disabled = !may
}

const cohort = { topic: room, binding: 'mnemonic', admin }
// The key's feed cursor on the room, kept with the key: every message is an
// update of the key's feed (SWIP-74 Rev 8), and the broker drops an index
// it already took as a retransmit — a reloaded page goes on past it.
const cursorKey = `bps-demo-cursor-${room}`
const session = new BpsClient({ api: node.api, peer: config.peer }).publish(cohort, key, { index: sessionStorage.getItem(cursorKey) ?? 0 })
session.on('ready', () => setState('ready'))
session.on('waiting', (w) => {
  setState('waiting', w.reason)
  log('', `waiting: ${w.reason} — the host must let ${me} speak`, 'system')
})
session.on('message', (m) => {
  // A browser session gets the payload only (it cannot ask for fields):
  // the name is the speaker's own; the node checked the roster admits it.
  let msg
  try {
    msg = JSON.parse(new TextDecoder().decode(m.payload))
  } catch {
    msg = { name: '?', text: new TextDecoder().decode(m.payload) }
  }
  log(msg.name, msg.text)
})
session.on('service', (s) => {
  $('roster').textContent = ['the host', ...s.publishers].join(', ')
  if (s.kind === 'EOS') log('', 'the host ended the room', 'system')
})
session.on('disconnect', (d) => log('', `disconnected: ${d.error.message}${d.retry ? `; again in ${d.delay} ms` : ''}`, 'system'))
session.on('close', (c) => setState('closed', c.error?.message ?? ''))

$('say').addEventListener('submit', (ev) => {
  ev.preventDefault()
  const text = $('text').value.trim()
  if (!text) return
  session.send(JSON.stringify({ name, text }))
  sessionStorage.setItem(cursorKey, session.index.toString())
  log(name, text)
  $('text').value = ''
})

if (host) {
  $('host').hidden = false
  const share = new URL(location.href)
  share.searchParams.set('admin', me)
  share.searchParams.set('node', '2')
  $('share').href = share.toString()
  $('grant').addEventListener('submit', async (ev) => {
    ev.preventDefault()
    const who = $('who').value.trim().replace(/^0x/, '').toLowerCase()
    try {
      await session.grant(who)
      log('', `${who} may speak`, 'system')
      $('who').value = ''
    } catch (e) {
      log('', `grant refused: ${e.message}`, 'system')
    }
  })
}
window.bpsDemo = { session, me }
