// The operator's command line, run as the operator runs it (a child process: node dist/admin.js,
// the bundle of scripts/admin.ts) against a real identity over gRPC: a tenant and its admin made with the password
// from stdin, from a file, or typed on a terminal; the exit status and the one line for every failure;
// and the password, the operator's secret and its token nowhere in what the CLI or identity wrote.
import { expect } from "chai";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startTestIdentity, type TestIdentity } from "../services/identity/test/support/test-identity.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = ["--enable-source-maps", "dist/admin.js"];

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI with only the environment given (and PATH), feeding `input` to its stdin. */
function runCli(args: string[], env: NodeJS.ProcessEnv, input = ""): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.once("error", reject);
    child.once("close", (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(input);
  });
}

const password = () => `pw ${randomBytes(12).toString("base64url")} x`;
const newTenantId = () => `cli-${randomBytes(5).toString("hex")}`;

describe("admin CLI: create-tenant against a real identity", function () {
  this.timeout(120_000);
  let id: TestIdentity;
  let env: NodeJS.ProcessEnv;
  let scratch: string;
  /** Everything the CLI ever wrote, and every password it was given: checked against each other at the end. */
  const outputs: string[] = [];
  const passwords: string[] = [];

  const run = async (args: string[], input?: string, over: NodeJS.ProcessEnv = {}) => {
    const result = await runCli(args, { ...env, ...over }, input);
    outputs.push(result.stdout, result.stderr);
    return result;
  };
  const logsIn = async (tenantId: string, email: string, pw: string) =>
    (await id.identity.createSession({ tenantId, email, password: pw })).user!;

  before(async () => {
    id = await startTestIdentity();
    env = { IDENTITY_ADDRESS: id.address, OPERATOR_SECRET: id.operatorSecret };
    scratch = mkdtempSync(join(tmpdir(), "switchyard-admin-cli-"));
  });
  after(async () => {
    await id?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("creates a tenant and its admin with the password from stdin, and says so in one line", async () => {
    const tenantId = newTenantId();
    const pw = password();
    passwords.push(pw);
    const result = await run(
      ["create-tenant", tenantId, "--admin", "root@cli.test", "--display-name", "CLI Test Co"],
      `${pw}\n`,
    );
    expect(result.stderr).to.equal("");
    expect(result.status).to.equal(0);
    const match = /^created tenant (\S+) \("CLI Test Co"\) with admin user (\d+) <root@cli\.test>\n$/.exec(
      result.stdout,
    );
    expect(match, result.stdout).to.not.equal(null);
    expect(match![1]).to.equal(tenantId);
    const admin = await logsIn(tenantId, "root@cli.test", pw);
    expect(admin.id.toString()).to.equal(match![2]);
    expect(admin.fullName, "--name defaults to the email").to.equal("root@cli.test");
  });

  it("reads the password from --password-file (one line, its line break dropped)", async () => {
    const tenantId = newTenantId();
    const pw = password();
    passwords.push(pw);
    const file = join(scratch, "admin-password");
    writeFileSync(file, `${pw}\r\n`, { mode: 0o600 });
    // stdin is ignored when a file is given: what it holds is no password.
    const result = await run(
      ["create-tenant", tenantId, "--admin", "jane@cli.test", "--name", "Jane Admin", "--password-file", file],
      "not the password\n",
    );
    expect([result.status, result.stderr]).to.deep.equal([0, ""]);
    expect(result.stdout).to.match(
      new RegExp(`^created tenant ${tenantId} \\("${tenantId}"\\) with admin user \\d+ <jane@cli\\.test>\\n$`),
    );
    const admin = await logsIn(tenantId, "jane@cli.test", pw);
    expect(admin.fullName).to.equal("Jane Admin");
  });

  it("fails a re-run on an existing tenant with exit 1 and one line, changing nothing", async () => {
    const tenantId = newTenantId();
    const pw = password();
    const other = password();
    passwords.push(pw, other);
    expect((await run(["create-tenant", tenantId, "--admin", "first@cli.test"], `${pw}\n`)).status).to.equal(0);
    for (const [email, input] of [
      ["first@cli.test", pw],
      ["second@cli.test", other],
    ] as const) {
      const again = await run(["create-tenant", tenantId, "--admin", email], `${input}\n`);
      expect(again.status).to.equal(1);
      expect(again.stdout).to.equal("");
      expect(again.stderr).to.equal(`admin: tenant "${tenantId}" already exists: nothing was changed\n`);
    }
    expect((await logsIn(tenantId, "first@cli.test", pw)).email).to.equal("first@cli.test");
    const err = await logsIn(tenantId, "second@cli.test", other).catch((e: unknown) => e);
    expect(err, "no second admin").to.be.instanceOf(Error);
  });

  it("fails on what identity refuses (a weak password, a bad tenant id or email) with exit 1 and one line, creating nothing", async () => {
    const tenantId = newTenantId();
    passwords.push("too-short");
    const cases: [string[], string, RegExp][] = [
      [
        ["create-tenant", tenantId, "--admin", "weak@cli.test"],
        "too-short\n",
        /^admin: identity refused the request: admin password must be 12 to 256 characters\n$/,
      ],
      [
        ["create-tenant", "Not_A_Slug", "--admin", "x@cli.test"],
        `${password()}\n`,
        /^admin: identity refused the request: tenant_id must be a lower-case slug[^\n]*\n$/,
      ],
      [
        ["create-tenant", tenantId, "--admin", "not-an-email"],
        `${password()}\n`,
        /^admin: identity refused the request: admin email must be a valid email address\n$/,
      ],
    ];
    for (const [args, input, expected] of cases) {
      passwords.push(input.trim());
      const result = await run(args, input);
      expect([result.status, result.stdout], args.join(" ")).to.deep.equal([1, ""]);
      expect(result.stderr).to.match(expected);
    }
    const pw = password();
    passwords.push(pw);
    expect(
      (await run(["create-tenant", tenantId, "--admin", "weak@cli.test"], `${pw}\n`)).status,
      "the tenant id is still free",
    ).to.equal(0);
  });

  it("fails with exit 1 and one line when the password cannot be had, the secret is wrong, or identity is away", async () => {
    const cases: [string[], string, NodeJS.ProcessEnv, RegExp][] = [
      [
        ["create-tenant", newTenantId(), "--admin", "a@cli.test"],
        "",
        {},
        /^admin: cannot read the password: no password in stdin\n$/,
      ],
      [
        ["create-tenant", newTenantId(), "--admin", "a@cli.test"],
        "two\nlines\n",
        {},
        /^admin: cannot read the password: the password in stdin must be one line\n$/,
      ],
      [
        ["create-tenant", newTenantId(), "--admin", "a@cli.test", "--password-file", join(scratch, "missing")],
        "",
        {},
        /^admin: cannot read the password: ENOENT[^\n]*\n$/,
      ],
      [
        ["create-tenant", newTenantId(), "--admin", "a@cli.test"],
        `${password()}\n`,
        { OPERATOR_SECRET: `${id.operatorSecret}x` },
        /^admin: identity refused OPERATOR_SECRET: it must be the secret of the "operator:<secret>" entry[^\n]*\n$/,
      ],
      [
        ["create-tenant", newTenantId(), "--admin", "a@cli.test"],
        `${password()}\n`,
        { IDENTITY_ADDRESS: "127.0.0.1:1" },
        /^admin: identity at 127\.0\.0\.1:1 is unavailable: [^\n]*\n$/,
      ],
    ];
    const results = await Promise.all(cases.map(([args, input, over]) => run(args, input, over)));
    results.forEach((result, i) => {
      const [args, input, , expected] = cases[i]!;
      if (input.trim()) passwords.push(input.trim());
      expect([result.status, result.stdout], args.join(" ")).to.deep.equal([1, ""]);
      expect(result.stderr, args.join(" ")).to.match(expected);
    });
  });

  it("answers usage errors with exit 2 before it reads or calls anything, and --help with 0", async () => {
    const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
      [[], {}, /^admin: a command is required\nUsage: npm run admin -- create-tenant /],
      [["delete-tenant", "acme"], {}, /^admin: unknown command "delete-tenant"\n/],
      [["create-tenant", "--admin", "a@cli.test"], {}, /^admin: create-tenant needs a tenant id\n/],
      [["create-tenant", "acme"], {}, /^admin: create-tenant needs --admin <email>\n/],
      [["create-tenant", "acme", "globex", "--admin", "a@cli.test"], {}, /^admin: create-tenant takes one tenant id\n/],
      [
        ["create-tenant", "acme", "--admin", "a@cli.test", "--password=hunter2hunter2"],
        {},
        /^admin: the password is never taken on the command line: use --password-file or stdin\n/,
      ],
      [["create-tenant", "acme", "--admin", "a@cli.test", "--force"], {}, /^admin: Unknown option '--force'/],
      [
        ["create-tenant", "acme", "--admin", "a@cli.test"],
        { OPERATOR_SECRET: "" },
        /^admin: OPERATOR_SECRET is required \(/,
      ],
      [
        ["create-tenant", "acme", "--admin", "a@cli.test"],
        { OPERATOR_SECRET: "short-secret" },
        /^admin: OPERATOR_SECRET: expected at least 32 visible ASCII characters \(the value is not shown\)\n$/,
      ],
      [
        ["create-tenant", "acme", "--admin", "a@cli.test"],
        { IDENTITY_ADDRESS: "identity" },
        /^admin: IDENTITY_ADDRESS: expected host:port/,
      ],
    ];
    passwords.push("a-password-long-enough");
    const results = await Promise.all(cases.map(([args, over]) => run(args, "a-password-long-enough\n", over)));
    results.forEach((result, i) => {
      const [args, , expected] = cases[i]!;
      expect([result.status, result.stdout], args.join(" ")).to.deep.equal([2, ""]);
      expect(result.stderr, args.join(" ")).to.match(expected);
      expect(result.stderr).to.not.include("hunter2").and.not.include("short-secret");
    });
    const help = await run(["--help"]);
    expect([help.status, help.stderr]).to.deep.equal([0, ""]);
    expect(help.stdout)
      .to.include("create-tenant <tenant_id> --admin <email>")
      .and.include("OPERATOR_SECRET")
      .and.include("Exit status");
  });

  const hasScript = spawnSync("script", ["--version"]).status === 0;
  (hasScript ? it : it.skip)(
    "asks for the password twice on a terminal without echoing it (util-linux script gives it one)",
    async () => {
      const tenantId = newTenantId();
      const pw = password();
      passwords.push(pw);
      const command = [process.execPath, ...CLI, "create-tenant", tenantId, "--admin", "tty@cli.test"]
        .map((a) => `'${a}'`)
        .join(" ");
      const child = spawn("script", ["-qfec", command, "/dev/null"], {
        cwd: ROOT,
        env: { PATH: process.env.PATH, TERM: "dumb", ...env },
        stdio: ["pipe", "pipe", "pipe"],
      });
      let screen = "";
      const seen = (text: string) =>
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(
            () => reject(new Error(`no "${text}" on the terminal: ${JSON.stringify(screen)}`)),
            30_000,
          );
          const check = () => {
            if (!screen.includes(text)) return;
            clearTimeout(timer);
            child.stdout.off("data", check);
            resolve();
          };
          child.stdout.on("data", check);
          check();
        });
      child.stdout.setEncoding("utf8").on("data", (d: string) => (screen += d));
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      // Typed only once the prompt shows, i.e. once echo is off (typed earlier, the terminal would echo it).
      await seen(`Password for tty@cli.test: `);
      child.stdin.write(`${pw}\r`);
      await seen("Repeat it: ");
      child.stdin.write(`${pw}\r`);
      await seen("created tenant");
      child.stdin.end();
      expect(await exited).to.equal(0);
      outputs.push(screen);
      expect(screen).to.not.include(pw);
      expect((await logsIn(tenantId, "tty@cli.test", pw)).email).to.equal("tty@cli.test");
    },
  );

  it("wrote no password, secret or token anywhere: not the CLI's output, not identity's log", () => {
    const cli = outputs.join("\n");
    const logs = id.logs();
    expect(logs).to.include("tenant created with its first admin");
    for (const secret of [...passwords, id.operatorSecret]) {
      expect(cli, "the CLI's output").to.not.include(secret);
      expect(logs, "identity's log").to.not.include(secret);
    }
    for (const text of [cli, logs]) expect(text).to.not.match(/eyJ[\w-]+\.eyJ|\$argon2/);
  });
});
