// Rules for catalog import jobs, without I/O: what a job's lines must be, how its per-line errors are
// kept, and the fingerprint that tells a retry (same lines) from a reuse of its key (other lines).
import { createHash } from "node:crypto";
import { DomainError } from "@switchyard/platform/domain-error.js";

/** The most lines one job takes (as many as one ImportItems stream). */
export const MAX_IMPORT_LINES = 10_000;
/** The per-line errors a job keeps (the first ones, by line); its `failed` count counts them all. */
export const MAX_JOB_ERRORS = 100;
/** A per-line error's message is cut to this many characters. */
export const MAX_LINE_MESSAGE_LENGTH = 300;
/** The reasons a line may be refused with. */
export const LINE_ERROR_CODES = ["INVALID_REQUEST", "RULE_VIOLATION"] as const;
export type LineErrorCode = (typeof LINE_ERROR_CODES)[number];

export type ImportJobStatus = "queued" | "running" | "succeeded" | "failed";

/** One line as the client sent it: the encoded ImportItemsRequest it becomes, or why it is no item. */
export interface ImportLineInput {
  /** From 1, strictly increasing within a job. */
  line: number;
  /** The line's ImportItemsRequest, encoded (undefined when the line is a problem). */
  request?: Uint8Array;
  problem?: { code: LineErrorCode; message: string };
}

export interface ImportLineError {
  line: number;
  code: string;
  message: string;
}

/** A message safe to store and show: no control characters, bounded. */
export function lineMessage(message: string): string {
  const clean = message.replace(/[\u0000-\u001f\u007f]/g, "\ufffd");
  return clean.length > MAX_LINE_MESSAGE_LENGTH ? `${clean.slice(0, MAX_LINE_MESSAGE_LENGTH - 1)}…` : clean;
}

/** A job's lines as a CreateImportJob request gives them, checked: 1 to 10000, numbered upwards, each an item or a known problem. */
export function importLines(
  lines: readonly {
    line: number;
    request?: Uint8Array | undefined;
    problem?: { code: string; message: string } | undefined;
  }[],
): ImportLineInput[] {
  if (lines.length === 0) throw new DomainError("INVALID_REQUEST", "an import job needs at least one line");
  if (lines.length > MAX_IMPORT_LINES)
    throw new DomainError("RULE_VIOLATION", `an import job takes at most ${MAX_IMPORT_LINES} lines`);
  let previous = 0;
  return lines.map(({ line, request, problem }) => {
    if (!Number.isInteger(line) || line <= previous)
      throw new DomainError("INVALID_REQUEST", "line numbers must start from 1 and increase");
    previous = line;
    if (problem) {
      if (request) throw new DomainError("INVALID_REQUEST", `line ${line} has both an item and a problem`);
      if (!(LINE_ERROR_CODES as readonly string[]).includes(problem.code))
        throw new DomainError("INVALID_REQUEST", `line ${line}: a problem's code is INVALID_REQUEST or RULE_VIOLATION`);
      return {
        line,
        problem: { code: problem.code as LineErrorCode, message: lineMessage(problem.message || "not a catalog item") },
      };
    }
    if (!request) throw new DomainError("INVALID_REQUEST", `line ${line} has neither an item nor a problem`);
    return { line, request };
  });
}

/** The fingerprint of a job's lines: the same lines (numbers, items, problems) give the same one. */
export function linesFingerprint(lines: readonly ImportLineInput[]): string {
  const hash = createHash("sha256");
  for (const l of lines) {
    hash.update(
      `${l.line}\u0000${l.request ? Buffer.from(l.request).toString("base64") : ""}\u0000${l.problem?.code ?? ""}\u0000${l.problem?.message ?? ""}\n`,
    );
  }
  return hash.digest("base64url");
}
