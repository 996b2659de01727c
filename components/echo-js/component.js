// echo-js: world `tool`; returns its input unchanged. Built with every
// componentize-js feature disabled, so it imports nothing but skillenv:env/types.
export function run(input) {
  return input;
}
