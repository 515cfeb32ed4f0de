// `npm start`: builds the bundles, then runs the launcher (dist/start.js) in this same process. npm
// runs its script through `sh -c`, which package.json's `exec` replaces with this process: npm's own
// child is then the launcher, so the SIGINT or SIGTERM npm forwards reaches it, as one sent to the
// process group or to this pid does. (Debian's sh does not exec a script's last command by itself:
// with `node build.mjs && node dist/start.js` a shell stood between them, died of npm's SIGTERM
// without passing it on, and left the launcher and every service running.)
// Plain JavaScript, like build.mjs: it runs before anything is compiled.
import { stop as stopEsbuild } from "esbuild";
import { buildAll, builtLine } from "./build.mjs";

// A stop asked for before the launcher listens (while building, say): the build ends (half a bundle is
// never left), and the launcher starts nothing.
let stopAsked;
const askStop = (signal) => (stopAsked ??= signal);
const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"];
for (const signal of SIGNALS) process.on(signal, askStop);

const started = Date.now();
try {
  await buildAll();
} catch (err) {
  // A terminal's Ctrl-C reaches esbuild's service process too, which ends the build.
  if (stopAsked === undefined) throw err;
}
// esbuild's service process is not needed again: it would otherwise stay this process's child for
// as long as the mesh runs.
await stopEsbuild();
if (stopAsked === undefined) process.stdout.write(builtLine(started));
const { runSwitchyard } = await import("../dist/start.js");
// The launcher listens for signals before it first waits: only then is this listener let go. (Had
// no listener been left for a moment, a signal already on its way would be lost.)
const running = runSwitchyard(stopAsked);
for (const signal of SIGNALS) process.off(signal, askStop);
await running;
