/** A small typed event emitter, the same in Node and browsers. */
export class Emitter<E extends { [K in keyof E]: (...args: never[]) => void }> {
  private listeners = new Map<keyof E, Set<E[keyof E]>>()

  /** Calls fn on every event of type; returns a function that removes it. */
  on<K extends keyof E>(type: K, fn: E[K]): () => void {
    let set = this.listeners.get(type)
    if (!set) this.listeners.set(type, (set = new Set()))
    set.add(fn)
    return () => this.off(type, fn)
  }

  /** Calls fn on the next event of type only. */
  once<K extends keyof E>(type: K, fn: E[K]): () => void {
    const off = this.on(type, ((...args: Parameters<E[K]>) => {
      off()
      ;(fn as (...a: Parameters<E[K]>) => void)(...args)
    }) as E[K])
    return off
  }

  off<K extends keyof E>(type: K, fn: E[K]): void {
    this.listeners.get(type)?.delete(fn)
  }

  protected emit<K extends keyof E>(type: K, ...args: Parameters<E[K]>): void {
    const set = this.listeners.get(type)
    if (!set) return
    for (const fn of [...set]) {
      try {
        ;(fn as (...a: Parameters<E[K]>) => void)(...args)
      } catch (e) {
        // A listener's exception is its own: report it without breaking the session.
        queueMicrotask(() => {
          throw e
        })
      }
    }
  }
}
