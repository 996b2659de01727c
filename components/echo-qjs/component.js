// echo-qjs: world `tool`; returns its input unchanged, like echo-js, but on the QuickJS engine
// (componentize-qjs): the same JavaScript at a fraction of StarlingMonkey's cost per fresh
// instance, for the env benchmark's comparison of the two engines.
export function run(input) {
  return input;
}
