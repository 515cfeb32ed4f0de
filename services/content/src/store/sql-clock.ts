// The database's clock as the content store keeps its times: to the millisecond, what a JavaScript
// Date holds, so that a time read back compares equal to the one written.
export const NOW = "date_trunc('milliseconds', clock_timestamp())";
