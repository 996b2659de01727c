/**
 * Wraps an async operation on objects so it runs once per object: concurrent and later calls
 * share the first promise. A failure is forgotten, so a retry runs again.
 */
export function oncePerInstance<T extends object, R>(operation: (target: T) => Promise<R>): (target: T) => Promise<R> {
  const results = new WeakMap<T, Promise<R>>();
  return (target) => {
    let pending = results.get(target);
    if (!pending) {
      pending = operation(target);
      results.set(target, pending);
      pending.catch(() => results.delete(target));
    }
    return pending;
  };
}
