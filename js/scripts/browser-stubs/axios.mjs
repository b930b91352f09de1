// axios in the browser bundle: bee-js imports it for its HTTP API, which
// this client never calls (it uses bee-js for keys, SOCs and BMT only, and
// fetch and WebSocket for the node). A call says so instead of sending.
export class AxiosError extends Error {}
export default function axios() {
  throw new Error('@ethersphere/bps: bee-js HTTP is not in the browser bundle; use bee-js itself for its API')
}
axios.AxiosError = AxiosError
