/**
 * The fuel counter every instrumented module imports: a mutable i64 holding the remaining fuel.
 * Its own module, so that pool workers, which only need this name, do not load the rewriter.
 */
export const FUEL_IMPORT = { module: "skillenv:fuel", name: "remaining" } as const;

/**
 * Where a module whose one small memory a worker recycles imports it from (memory-import.ts): the
 * worker hands each instance a zeroed memory of the module's limits.
 */
export const RECYCLED_MEMORY = { module: "skillenv:memory", name: "recycled" } as const;
