// A child process for call-tables.test.ts: an HTTP/2 server and client in this process, 50 requests in
// flight for a fixed number of requests after a forced full GC, run with --expose-gc --trace-gc-nvp
// (the parent reads what each scavenge promoted). "tables" installs the platform's call tables first;
// "node" keeps Node's own Map and Set.
import { connect, createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { installAsyncResourceBind } from "../../src/grpc/async-resource-bind.js";
import { installCallTables } from "../../src/grpc/call-tables.js";

// Both ways without Node's AsyncResource.bind, which promotes every request by itself (async-resource-bind.ts).
installAsyncResourceBind();
const mode = process.argv[2];
if (mode === "tables") installCallTables();
const REQUESTS = Number(process.argv[3] ?? 20_000);
const IN_FLIGHT = 50;

const server = createServer();
server.on("stream", (stream) => {
  stream.respond({ ":status": 200 });
  stream.end(Buffer.alloc(200));
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);

function request(): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": "POST", ":path": "/call" });
    req.on("error", reject);
    req.on("end", resolve);
    req.resume();
    req.end(Buffer.alloc(100));
  });
}

async function run(count: number): Promise<void> {
  let started = 0;
  const worker = async () => {
    while (started < count) {
      started++;
      await request();
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

await run(5_000); // warm
(globalThis as { gc?: () => void }).gc!();
process.stdout.write("MEASURED FROM HERE\n");
await run(REQUESTS);
process.stdout.write(`DONE ${REQUESTS}\n`);
session.close();
server.close();
