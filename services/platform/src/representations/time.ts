import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

/** RFC 3339 timestamp of a proto Timestamp (null when absent). */
export function isoTime(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}
