// What a request is shed as under overload (issue 46): its operation's declared priority
// (`x-switchyard-priority`), lowered to `sheddable` for the work of a default operation that can wait —
// a list page past the first (asked for with a cursor) and opening a live stream. Critical work is
// never lowered, and nothing a client sends raises it.
import type { Priority } from "@switchyard/platform/priority.js";
import type { CompiledOperation } from "./openapi.js";

export interface RequestShape {
  /** The request asks for a page past the first (a `cursor` query parameter). */
  pagesOn: boolean;
  /** The request opens a live stream (text/event-stream). */
  eventStream: boolean;
}

export function requestPriority(operation: Pick<CompiledOperation, "priority">, shape: RequestShape): Priority {
  if (operation.priority !== "default") return operation.priority;
  return shape.pagesOn || shape.eventStream ? "sheddable" : "default";
}

/** The query string (after the `?`; empty: none) names a non-empty `cursor`: a page past the first. */
export function asksForLaterPage(search: string): boolean {
  return search.length > 0 && /(?:^|&)cursor=[^&]/.test(search);
}
