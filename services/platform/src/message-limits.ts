// How large a gRPC message may be, stated once for every server and every channel. A limit the
// answers do not fit is a failure no client can do anything about (grpc-js refuses the whole answer),
// so every answer is kept well within it: a list page's items are bounded in bytes (paging.ts), and
// a single resource is bounded by its fields' limits. test/message-limits.test.ts encodes the largest
// answer of each kind and checks that it fits.

/**
 * The largest message a service sends or takes, and the largest answer a channel accepts (grpc-js's
 * default receive limit, now stated; its send limit is unbounded by default).
 */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * What the items of one list page may take in bytes (estimated from their encoded size): a page of
 * large items holds fewer than were asked for, and a cursor to the rest. A quarter of the message
 * limit, so one item over it (a page always holds one) still fits.
 */
export const MAX_PAGE_BYTES = 1024 * 1024;
