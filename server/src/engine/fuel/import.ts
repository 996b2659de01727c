/**
 * The fuel counter every instrumented module imports: a mutable i64 holding the remaining fuel.
 * Its own module, so that pool workers, which only need this name, do not load the rewriter.
 */
export const FUEL_IMPORT = { module: "skillenv:fuel", name: "remaining" } as const;
