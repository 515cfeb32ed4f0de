// The operator's command line (`npm run admin`, or `node dist/admin.js` in a Kubernetes Job): it
// creates a tenant and its first admin through identity's OperatorService, with the operator's own
// service token. It speaks gRPC and nothing else — no database, no service code — so it imports
// platform modules by path (its package index would bring the store adapters along). The password
// arrives from a file or stdin, never the command line, and is never written anywhere.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { Writable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { OperatorService } from "@switchyard/gen/switchyard/identity/v1/operator_pb.js";
import { OPERATOR_SERVICE, SERVICE_AUTHORIZATION } from "@switchyard/platform/caller.js";
import { ConfigError, grpcTlsSettings, loadConfig, parse, setting } from "@switchyard/platform/config.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc/client.js";
import { channelSecurityFromFiles, tlsFilesOf } from "@switchyard/platform/grpc/tls.js";

export const EXIT_OK = 0;
/** The command ran and failed: one line on stderr says why. */
export const EXIT_FAILED = 1;
/** The command line or the environment is wrong: nothing was attempted. */
export const EXIT_USAGE = 2;

/** Deadlines of the two calls: the token, and the creation (which hashes the password). */
const TOKEN_DEADLINE_MS = 5_000;
const CREATE_DEADLINE_MS = 15_000;

const USAGE_LINE = `Usage: npm run admin -- create-tenant <tenant_id> --admin <email> [--name "<full name>"] [--display-name "<tenant name>"] [--password-file <path>]`;

export const USAGE = `${USAGE_LINE}
       (in the image: node dist/admin.js create-tenant …)

Creates a tenant and its first admin on a running mesh, through identity's operator RPC.
The admin's password is read from --password-file, or else from stdin (asked twice, without echo,
on a terminal): one line, a final line break is dropped. It is never taken on the command line.
--name defaults to the email, --display-name to the tenant id.

Environment:
  OPERATOR_SECRET   required: the secret of the "operator:<secret>" entry in identity's IDENTITY_SERVICE_CREDENTIALS
  IDENTITY_ADDRESS  identity's gRPC address (default 127.0.0.1:50051)
  GRPC_TLS_CERT_FILE, GRPC_TLS_KEY_FILE, GRPC_TLS_CA_FILE, GRPC_TLS_TRUST_DOMAIN
                    with mutual TLS on the mesh: the operator's certificate (spiffe://<domain>/operator), its key, the CA

Exit status: 0 created; 1 failed, with one line on stderr (a tenant that exists already is a failure:
nothing is changed); 2 usage error (arguments or environment), nothing attempted.
`;

/** Never echoes the value: it is a secret. */
function secretParser(raw: string): string {
  if (!/^[\x21-\x7e]{32,}$/.test(raw))
    throw new Error("expected at least 32 visible ASCII characters (the value is not shown)");
  return raw;
}

export const adminSettings = {
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity's gRPC address", "127.0.0.1:50051"),
  // With mutual TLS on the mesh, the operator's own certificate (spiffe://<domain>/operator).
  ...grpcTlsSettings,
  operatorSecret: setting(
    "OPERATOR_SECRET",
    secretParser,
    `the operator's secret: its entry "${OPERATOR_SERVICE}:<secret>" in identity's IDENTITY_SERVICE_CREDENTIALS`,
  ),
};

export interface AdminIo {
  stdin: NodeJS.ReadStream;
  stdout: Writable;
  stderr: Writable;
}

interface CreateTenantCommand {
  tenantId: string;
  adminEmail: string;
  adminFullName: string;
  displayName: string;
  passwordFile: string | undefined;
}

class UsageError extends Error {}

function parseCommand(argv: string[]): CreateTenantCommand | "help" {
  // Said plainly, rather than as an unknown option: a password in argv ends up in shell history and `ps`.
  if (argv.some((a) => a === "--password" || a.startsWith("--password=")))
    throw new UsageError("the password is never taken on the command line: use --password-file or stdin");
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        admin: { type: "string" },
        name: { type: "string" },
        "display-name": { type: "string" },
        "password-file": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) return "help";
  const [command, tenantId, ...rest] = positionals;
  if (command === undefined) throw new UsageError("a command is required");
  if (command !== "create-tenant") throw new UsageError(`unknown command "${command}"`);
  if (tenantId === undefined || tenantId === "") throw new UsageError("create-tenant needs a tenant id");
  if (rest.length > 0) throw new UsageError("create-tenant takes one tenant id");
  if (!values.admin) throw new UsageError("create-tenant needs --admin <email>");
  return {
    tenantId,
    adminEmail: values.admin,
    adminFullName: values.name ?? "",
    displayName: values["display-name"] ?? "",
    passwordFile: values["password-file"],
  };
}

/** The password in a file's or a stream's text: one line, without the line break that usually ends it. */
function passwordIn(text: string, where: string): string {
  const password = text.replace(/\r?\n$/, "");
  if (password === "") throw new Error(`no password in ${where}`);
  if (/[\r\n]/.test(password)) throw new Error(`the password in ${where} must be one line`);
  return password;
}

async function readAll(input: NodeJS.ReadStream): Promise<string> {
  input.setEncoding("utf8");
  let text = "";
  for await (const chunk of input) text += chunk as string;
  return text;
}

/** One line typed on a terminal already in raw mode (it shows nothing; we handle the keys). */
function readHiddenLine(prompt: string, input: NodeJS.ReadStream, output: Writable): Promise<string> {
  return new Promise((resolve, reject) => {
    let typed = "";
    const finish = (error?: Error) => {
      input.off("data", onData);
      input.pause();
      output.write("\n");
      if (error) reject(error);
      else resolve(typed);
    };
    const onData = (chunk: string) => {
      // An escape sequence (arrow keys and the like) is no part of a password.
      if (chunk.startsWith("\u001b")) return;
      for (const ch of chunk) {
        if (ch === "\r" || ch === "\n") return finish();
        // Raw mode delivers Ctrl-C and Ctrl-D as characters instead of signals.
        if (ch === "\u0003" || (ch === "\u0004" && typed === "")) return finish(new Error("cancelled"));
        if (ch === "\u007f" || ch === "\b") typed = [...typed].slice(0, -1).join("");
        else if (ch >= " ") typed += ch;
      }
    };
    input.setEncoding("utf8");
    input.on("data", onData);
    input.resume();
    output.write(prompt);
  });
}

async function readPassword(command: CreateTenantCommand, io: AdminIo): Promise<string> {
  if (command.passwordFile !== undefined)
    return passwordIn(readFileSync(command.passwordFile, "utf8"), command.passwordFile);
  if (!io.stdin.isTTY) return passwordIn(await readAll(io.stdin), "stdin");
  // Echo goes off before the first prompt shows and comes back only after the second answer: a
  // password typed as soon as a prompt appears (or pasted ahead) is never shown by the terminal.
  io.stdin.setRawMode(true);
  try {
    const password = await readHiddenLine(`Password for ${command.adminEmail}: `, io.stdin, io.stderr);
    if ((await readHiddenLine("Repeat it: ", io.stdin, io.stderr)) !== password)
      throw new Error("the two passwords differ");
    return passwordIn(password, "what was typed");
  } finally {
    io.stdin.setRawMode(false);
  }
}

/** One line that says what went wrong, for the operator (it never contains the password or a token). */
function describeFailure(
  err: unknown,
  step: "token" | "create",
  command: CreateTenantCommand,
  address: string,
): string {
  if (!(err instanceof ConnectError)) return (err as Error).message ?? String(err);
  const message = err.rawMessage.replace(/\s+/g, " ").trim();
  switch (err.code) {
    case Code.Unavailable:
      return `identity at ${address} is unavailable: ${message}`;
    case Code.DeadlineExceeded:
      return step === "token"
        ? `identity at ${address} did not answer within ${TOKEN_DEADLINE_MS / 1000} s`
        : `identity did not answer within ${CREATE_DEADLINE_MS / 1000} s: the tenant may have been created; run the same command again to find out (it then says the tenant exists)`;
    case Code.AlreadyExists:
      return `tenant "${command.tenantId}" already exists: nothing was changed`;
    case Code.InvalidArgument:
      return `identity refused the request: ${message}`;
  }
  if (step === "token" && err.code === Code.Unauthenticated) {
    return `identity refused OPERATOR_SECRET: it must be the secret of the "${OPERATOR_SERVICE}:<secret>" entry in identity's IDENTITY_SERVICE_CREDENTIALS`;
  }
  return `${step === "token" ? "getting the operator's token" : "creating the tenant"} failed: ${Code[err.code]} ${errorInfoOf(err)?.reason ?? ""} ${message}`.replace(
    /\s+/g,
    " ",
  );
}

/** Runs one command line; resolves to the exit status. Writes the outcome, never a secret. */
export async function runAdmin(argv: string[], env: NodeJS.ProcessEnv, io: AdminIo): Promise<number> {
  let command;
  try {
    command = parseCommand(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`admin: ${err.message}\n${USAGE_LINE}\n(--help says more)\n`);
    return EXIT_USAGE;
  }
  if (command === "help") {
    io.stdout.write(USAGE);
    return EXIT_OK;
  }
  let config;
  try {
    config = loadConfig(adminSettings, env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr.write(`admin: ${err.problems.join("; ")}\n`);
    return EXIT_USAGE;
  }
  let password;
  try {
    password = await readPassword(command, io);
  } catch (err) {
    io.stderr.write(`admin: cannot read the password: ${(err as Error).message}\n`);
    return EXIT_FAILED;
  }

  const files = tlsFilesOf(config);
  const channel = openChannel(
    config.identityAddress,
    [],
    {},
    files && channelSecurityFromFiles(files, config.tlsTrustDomain, "identity"),
  );
  let step: "token" | "create" = "token";
  try {
    const identity = createServiceClient(IdentityService, channel);
    const operator = createServiceClient(OperatorService, channel);
    const { accessToken } = await identity.createServiceToken(
      { clientId: OPERATOR_SERVICE, clientSecret: config.operatorSecret },
      { timeoutMs: TOKEN_DEADLINE_MS },
    );
    step = "create";
    const { tenant, admin } = await operator.createTenant(
      {
        tenantId: command.tenantId,
        displayName: command.displayName,
        adminEmail: command.adminEmail,
        adminFullName: command.adminFullName,
        adminPassword: password,
      },
      { timeoutMs: CREATE_DEADLINE_MS, headers: { [SERVICE_AUTHORIZATION]: `Bearer ${accessToken}` } },
    );
    io.stdout.write(
      `created tenant ${tenant!.id} ("${tenant!.displayName}") with admin user ${admin!.id} <${admin!.email}>\n`,
    );
    return EXIT_OK;
  } catch (err) {
    io.stderr.write(`admin: ${describeFailure(err, step, command, config.identityAddress)}\n`);
    return EXIT_FAILED;
  } finally {
    channel.close();
  }
}
