// CI runs the PostgreSQL and Redis suites for real: an unreachable server fails the run.
import net from "node:net";
import pg from "pg";

async function checkPostgres(url) {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  const { rows } = await client.query("select version()");
  await client.end();
  return rows[0].version.split(",")[0];
}

function checkRedis(url) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port || 6379), hostname);
    socket.setTimeout(5_000, () => socket.destroy(new Error("timeout")));
    socket.once("error", reject);
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (d) => {
      socket.end();
      d.toString().startsWith("+PONG") ? resolve("PONG") : reject(new Error(`unexpected answer ${d}`));
    });
  });
}

let failed = false;
for (const [name, check, url] of [
  ["PostgreSQL", checkPostgres, process.env.DATABASE_URL],
  ["Redis", checkRedis, process.env.REDIS_URL],
]) {
  try {
    console.log(`${name} at ${new URL(url).host}: ${await check(url)}`);
  } catch (err) {
    failed = true;
    console.error(`${name} at ${url} is unreachable: ${err.message}`);
  }
}
process.exit(failed ? 1 : 0);
