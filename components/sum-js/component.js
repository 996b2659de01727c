// sum-js: world `tool`; sums the integers below n in a JavaScript loop (uint32 arithmetic) and
// returns {"v":1,"sum":N}: compute inside StarlingMonkey, for the fuel benchmark (bench/env.ts).
// Input: {"v":1,"n":N}. A pure component: it imports nothing but skillenv:env/types.
export function run(input) {
  const { n } = JSON.parse(input);
  if (!Number.isSafeInteger(n) || n < 0) throw { code: "invalid_input", message: 'expected {"v":1,"n":non-negative integer}' };
  let sum = 0;
  for (let i = 0; i < n; i++) sum = (sum + i) >>> 0;
  return JSON.stringify({ v: 1, sum });
}
