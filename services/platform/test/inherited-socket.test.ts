// A process serves on the listening socket its launcher bound and handed over (LISTEN_FD), so the
// port is never free between being chosen and being served: nobody else can bind it meanwhile, and
// a client connecting before the process is up waits instead of being refused.
import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type AddressInfo, type Server } from "node:net";
import { fileURLToPath } from "node:url";
import { Health, HealthCheckResponse_ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";

const SERVER = fileURLToPath(new URL("../src/server.ts", import.meta.url));
const LOGGER = fileURLToPath(new URL("../src/logger.ts", import.meta.url));
// A gRPC server with nothing but health, on the inherited socket; it starts after a pause, as a
// real service does while it opens its database.
const CHILD = `
  const { startGrpcServer } = await import(${JSON.stringify(SERVER)});
  const { createLogger } = await import(${JSON.stringify(LOGGER)});
  await new Promise((r) => setTimeout(r, 500));
  await startGrpcServer({ name: "child", host: "127.0.0.1", port: 0, listenFd: 3, services: [], logger: createLogger("child", "silent") });
  process.send?.("serving");
`;

function bindFree(): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => resolve(server));
  });
}

function tryBind(port: number): Promise<string> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
    server.listen({ host: "127.0.0.1", port }, () => server.close(() => resolve("bound")));
  });
}

describe("serving on an inherited listening socket (LISTEN_FD)", function () {
  this.timeout(20_000);
  let child: ChildProcess | undefined;
  after(() => child?.kill("SIGKILL"));

  it("keeps the port taken from the launcher's bind to the child's serving, and answers a client that came early", async () => {
    const socket = await bindFree();
    const port = (socket.address() as AddressInfo).port;
    const fd = (socket as unknown as { _handle: { fd: number } })._handle.fd;
    child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", CHILD], {
      stdio: ["ignore", "inherit", "inherit", fd, "ipc"],
    });
    socket.close(); // the launcher's copy: the child holds the socket now
    const serving = new Promise<void>((resolve, reject) => {
      child!.once("message", () => resolve());
      child!.once("exit", (code) => reject(new Error(`the child exited (${code}) before serving`)));
    });

    expect(await tryBind(port), "nobody else can bind the port while the child starts").to.equal("EADDRINUSE");
    // A client asking before the child serves is answered once it does (its connection waits in the backlog).
    const channel = openChannel(`127.0.0.1:${port}`);
    try {
      const early = createServiceClient(Health, channel).check({ service: "" }, { timeoutMs: 10_000 });
      await serving;
      expect((await early).status).to.equal(HealthCheckResponse_ServingStatus.SERVING);
      expect(await tryBind(port), "nor while it serves").to.equal("EADDRINUSE");
    } finally {
      channel.close();
    }
    const exited = new Promise((resolve) => child!.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    expect(
      await tryBind(port),
      "the port is free once the child is gone (a dead server refuses, it does not hang)",
    ).to.equal("bound");
  });
});
