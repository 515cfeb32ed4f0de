// A process the mesh launcher started (`npm start`, the tests: scripts/mesh.ts) stops when the launcher
// is gone, however it went. A launcher killed with SIGKILL can stop nothing, and its processes, in
// process groups of their own, hear no terminal: they would serve on, holding their ports. So each
// inherits one end of a pipe whose other end only the launcher holds; nothing is ever written on it,
// and its end (EOF) is the launcher's exit. Only where the launcher names the pipe (LAUNCHER_FD): a
// deployment's processes outlive whatever started them.
import { Socket } from "node:net";

/** Calls `gone` once when the pipe on `fd` ends (or is no pipe at all); it keeps nothing alive meanwhile. */
export function watchLauncher(fd: number, gone: () => void): void {
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    gone();
  };
  let pipe: Socket;
  try {
    pipe = new Socket({ fd, readable: true, writable: false });
  } catch {
    return once(); // no such descriptor: whatever named it is not there
  }
  pipe.on("end", once).on("close", once).on("error", once);
  pipe.resume();
  pipe.unref();
}
