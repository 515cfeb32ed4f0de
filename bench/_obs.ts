import { prepareBaseline, BEFORE_OBSERVABILITY } from "./baseline.js";
import { measureHttp } from "./load/http-load.js";
import { startMeshFixture } from "./mesh-fixture.js";
const load = { concurrency: 50, connections: 50, seconds: 8, warmupSeconds: 2 };
const b = await prepareBaseline(process.env.REF ?? BEFORE_OBSERVABILITY, console.error);
try {
  for (let i = 0; i < 5; i++) for (const which of ["before", "now"]) {
    const mesh = which === "before" ? await b.startMesh() : await startMeshFixture({ limit: "none" });
    const r = await measureHttp({ url: `${mesh.gatewayUrl}/v1/payments/${mesh.paymentId}`, headers: { authorization: `Bearer ${mesh.token}` } }, { ...load, processes: mesh.pids });
    console.log(which, r.reqPerSec.toFixed(0), r.serverCpuMsPerRequest?.toFixed(3), JSON.stringify(Object.fromEntries(Object.entries(r.cpuMsPerRequestBy ?? {}).filter(([k]) => k === "gateway" || k === "payments").map(([k, v]) => [k, +v.toFixed(3)]))));
    await mesh.stop();
  }
} finally { await b.remove(); }
process.exit(0);
