// debug in the browser bundle: bee-js's HTTP logging, never reached.
export default function debug() {
  const log = () => {}
  log.enabled = false
  return log
}
