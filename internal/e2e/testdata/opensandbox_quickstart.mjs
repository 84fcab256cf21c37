// The stock OpenSandbox JS SDK (npm @alibaba-group/opensandbox) against
// agent2env (TestOpenSandboxSDK's "js sdk"): its README quickstart, then a
// failing command and a writeFiles/readFile round trip, then kill; then
// the code-interpreter quickstart in a sandbox of CODE_IMAGE: x = 1, then
// x + 1, an exception, a matplotlib chart whose PNG comes back in the raw
// result. OpenSandbox's JS code-interpreter package is not published on
// npm, so the code runs through what it is built on: the SDK's own execd
// client (@alibaba-group/opensandbox/internal's createExecdClient) on the
// sandbox's endpoint, the SSE stream read raw.
//
//   node opensandbox_quickstart.mjs NODE_MODULES IMAGE CODE_IMAGE
//
// NODE_MODULES is where scripts/test-peers.sh installed the SDK; the
// connection comes from OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY, as
// the SDK reads them. Prints one JSON object on its last line, which the
// Go test checks.
import { createRequire } from "node:module";
import { join } from "node:path";

const [modules, image, codeImage] = process.argv.slice(2);
const require = createRequire(join(modules, "noop.js"));
const { ConnectionConfig, Sandbox, SandboxException } = require("@alibaba-group/opensandbox");
const { createExecdClient } = require("@alibaba-group/opensandbox/internal");

const CHART = `
import matplotlib
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.show()
`;
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

// runCode posts code to the execd client's /code in context ctx and
// returns the stream's events, each a JSON object on a line of its own
// (an SSE "data:" prefix allowed).
async function runCode(execd, ctx, code) {
  const { response, error } = await execd.POST("/code", {
    body: { code, context: { id: ctx, language: "python" } },
    parseAs: "stream",
  });
  if (error || !response.ok) throw new Error(`POST /code: ${response.status} ${JSON.stringify(error)}`);
  const text = await new Response(response.body).text();
  return text
    .split("\n")
    .map((l) => l.replace(/^data:\s*/, "").trim())
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l));
}

async function codeInterpreter(out) {
  const sandbox = await Sandbox.create({
    connectionConfig: new ConnectionConfig(),
    image: codeImage,
    entrypoint: ["/opt/code-interpreter/code-interpreter.sh"],
    timeoutSeconds: 10 * 60,
  });
  try {
    const ep = await sandbox.getEndpoint(44772);
    const execd = createExecdClient({ baseUrl: `http://${ep.endpoint}`, headers: ep.headers ?? {} });
    const { data: ctx, error } = await execd.POST("/code/context", { body: { language: "python" } });
    if (error) throw new Error(`POST /code/context: ${JSON.stringify(error)}`);
    const results = (events) => events.filter((e) => e.type === "result").map((e) => e.results);
    const errors = (events) => events.filter((e) => e.type === "error").map((e) => e.error);
    const first = await runCode(execd, ctx.id, "x = 1");
    out.firstErrors = errors(first).length;
    out.xPlus1 = results(await runCode(execd, ctx.id, "x + 1"))[0]?.text;
    const failed = errors(await runCode(execd, ctx.id, "1 / 0"))[0];
    out.errorName = failed?.ename;
    out.errorValue = failed?.evalue;
    const chart = await runCode(execd, ctx.id, CHART);
    out.chartErrors = errors(chart).length;
    const pngs = results(chart)
      .filter((r) => r["image/png"])
      .map((r) => Buffer.from(r["image/png"], "base64"));
    out.chartPng = pngs.length > 0 && pngs[0].subarray(0, 8).equals(PNG_MAGIC);
    out.lastEvent = chart[chart.length - 1]?.type;
  } finally {
    await sandbox.kill();
    await sandbox.close();
  }
}

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
  await codeInterpreter(out);
} catch (err) {
  out.error = err instanceof SandboxException ? `[${err.error.code}] ${err.error.message ?? ""}` : String(err?.stack ?? err);
}
console.log(JSON.stringify(out));
