// A request's priority (issue 46): what is shed first when a process is overloaded. The gateway gives
// every route one (never the client), and it travels with the call to the services and onward, as
// the deadline and the request id do.

/** From the last shed to the first: money moving and logins, most requests, what can wait. */
export const PRIORITIES = ["critical", "default", "sheddable"] as const;
export type Priority = (typeof PRIORITIES)[number];

/** The call metadata that carries it between processes. */
export const PRIORITY_HEADER = "x-switchyard-priority";

/** A priority as sent; anything else (none, unknown) is `default`. */
export function priorityFrom(value: unknown): Priority {
  return value === "critical" || value === "sheddable" ? value : "default";
}
