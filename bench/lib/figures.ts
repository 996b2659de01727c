import { formatTable, type Column } from "./table.ts";

/** A headline figure of a suite beside its baseline, its target and, where one exists, a figure measured elsewhere. */
export interface Figure {
  figure: string;
  ours: string;
  /** What the same run measured for comparison, or "-". */
  baseline: string;
  target: string;
  /** Undefined where the figure has no target to meet. */
  met?: boolean;
  /** A published figure from another machine, for context only. */
  reference?: string;
}

/** The figures as a table; the reference column appears only when `referenceHeader` is given. */
export function formatFigures(figures: readonly Figure[], referenceHeader?: string): string {
  const columns: Column<Figure>[] = [
    { header: "figure", value: (f) => f.figure, align: "left" },
    { header: "ours", value: (f) => f.ours },
    { header: "baseline (same run)", value: (f) => f.baseline },
    { header: "target", value: (f) => f.target },
    { header: "verdict", value: (f) => (f.met === undefined ? "-" : f.met ? "met" : "MISSED") },
  ];
  if (referenceHeader) columns.push({ header: referenceHeader, value: (f) => f.reference ?? "-" });
  return formatTable(columns, figures);
}
