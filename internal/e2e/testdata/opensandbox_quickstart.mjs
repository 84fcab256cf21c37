// The stock OpenSandbox JS SDK (npm @alibaba-group/opensandbox) against
// agent2env (TestOpenSandboxSDK's "js sdk"): its README quickstart, then a
// failing command and a writeFiles/readFile round trip, then kill.
//
//   node opensandbox_quickstart.mjs NODE_MODULES IMAGE
//
// NODE_MODULES is where scripts/test-peers.sh installed the SDK; the
// connection comes from OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY, as
// the SDK reads them. Prints one JSON object on its last line, which the
// Go test checks.
import { createRequire } from "node:module";
import { join } from "node:path";

const [modules, image] = process.argv.slice(2);
const require = createRequire(join(modules, "noop.js"));
const { ConnectionConfig, Sandbox, SandboxException } = require("@alibaba-group/opensandbox");

const out = {};
try {
  const sandbox = await Sandbox.create({
    connectionConfig: new ConnectionConfig(),
    image,
    timeoutSeconds: 10 * 60,
  });
  out.id = sandbox.id;
  try {
    const execution = await sandbox.commands.run("echo 'Hello Sandbox!'");
    out.stdout = execution.logs.stdout[0]?.text;
    out.exitCode = execution.exitCode;
    const failed = await sandbox.commands.run("echo oops >&2; exit 3");
    out.failedExitCode = failed.exitCode;
    out.failedStderr = failed.logs.stderr.map((m) => m.text).join("");
    await sandbox.files.writeFiles([{ path: "/tmp/demo/hello.txt", data: "Hello World", mode: 644 }]);
    out.read = await sandbox.files.readFile("/tmp/demo/hello.txt");
    out.endpoint = (await sandbox.getEndpoint(44772)).endpoint;
  } finally {
    await sandbox.kill();
    await sandbox.close();
  }
} catch (err) {
  out.error = err instanceof SandboxException ? `[${err.error.code}] ${err.error.message ?? ""}` : String(err?.stack ?? err);
}
console.log(JSON.stringify(out));
