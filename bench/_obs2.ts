import { prepareBaseline } from "./baseline.js";
import { measureHttp } from "./load/http-load.js";
const load = { concurrency: 50, connections: 50, seconds: 8, warmupSeconds: 2 };
const a = await prepareBaseline("f9e109b", console.error);
const b = await prepareBaseline("b7d89dc", console.error);
try {
  for (let i = 0; i < 5; i++) for (const [which, base] of [["before f9e109b", a], ["after  b7d89dc", b]] as const) {
    const mesh = await base.startMesh();
    const r = await measureHttp({ url: `${mesh.gatewayUrl}/v1/payments/${mesh.paymentId}`, headers: { authorization: `Bearer ${mesh.token}` } }, { ...load, processes: mesh.pids });
    console.log(which, r.reqPerSec.toFixed(0), r.serverCpuMsPerRequest?.toFixed(3), JSON.stringify(Object.fromEntries(Object.entries(r.cpuMsPerRequestBy ?? {}).filter(([k]) => k === "gateway" || k === "payments").map(([k, v]) => [k, +v.toFixed(3)]))));
    await mesh.stop();
  }
} finally { await a.remove(); await b.remove(); }
process.exit(0);
