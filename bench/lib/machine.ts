import * as fs from "node:fs";
import * as os from "node:os";

/**
 * One line on how busy the machine was. Other work on a 2-core box shows up directly in round-trip
 * times (both processes wait for a core), so a result is only comparable with this beside it.
 * CPU pressure (Linux PSI, "some avg10"): share of the last 10 s in which a runnable task waited for a CPU.
 */
export function machineLoad(): string {
  const [load1] = os.loadavg();
  let pressure = "n/a";
  try {
    const match = /some avg10=([\d.]+)/.exec(fs.readFileSync("/proc/pressure/cpu", "utf8"));
    if (match) pressure = `${match[1]}%`;
  } catch {
    // Not Linux, or PSI disabled: leave it out.
  }
  return `${os.availableParallelism()} CPUs, load avg (1 min) ${load1!.toFixed(2)}, CPU pressure (avg10) ${pressure}`;
}
