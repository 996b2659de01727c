export interface Column<Row> {
  header: string;
  value: (row: Row) => string;
  /** Numbers right-aligned so decimal points line up; names left-aligned. */
  align?: "left" | "right";
}

/** Renders rows as aligned plain-text columns (stable in logs and issue comments, no box drawing). */
export function formatTable<Row>(columns: readonly Column<Row>[], rows: readonly Row[]): string {
  const cells = [columns.map((c) => c.header), ...rows.map((row) => columns.map((c) => c.value(row)))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i]!.length)));
  const render = (line: string[]) =>
    line
      .map((cell, i) => (columns[i]!.align === "left" ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join("  ")
      .trimEnd();
  const rule = widths.map((w) => "-".repeat(w)).join("  ");
  return [render(cells[0]!), rule, ...cells.slice(1).map(render)].join("\n");
}

export function fixed(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : "-";
}
