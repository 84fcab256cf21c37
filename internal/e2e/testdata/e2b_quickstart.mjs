// The stock E2B JS SDKs (npm e2b and @e2b/code-interpreter) against
// agent2env (TestE2BSDK's "js" subtests), unchanged.
//
//   node e2b_quickstart.mjs NODE_MODULES MODE
//
// NODE_MODULES is where scripts/test-peers.sh installed the SDKs; the
// connection comes from E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, as
// the SDKs read them. MODE is:
//
//   quickstart   both READMEs' quickstarts: the code interpreter's
//                (runCode('x = 1'), runCode('x+=1; x'), a matplotlib
//                chart as a png, files write/read, commands.run), then
//                runCode's envs in JavaScript,
//                a background command connected to by pid and killed, a
//                non-zero exit, list by metadata, setTimeout, getInfo,
//                getMetrics,
//                pause and resume by connect, kill
//   quickstart-nopause  the same without pause and resume (a runtime
//                that cannot pause: kubernetes)
//   interpreter  the code interpreter's quickstart alone
//   base         the base SDK's quickstart on template base (create,
//                commands.run, files write/read, kill)
//   badkey       create with a wrong API key
//   badtemplate  create of a template that does not exist
//
// Prints one JSON object on its last line, which the Go test checks.
import { createRequire } from "node:module";
import { join } from "node:path";

const [modules, mode] = process.argv.slice(2);
const require = createRequire(join(modules, "noop.js"));
const e2b = require("e2b");

// quickstart runs the code interpreter's quickstart and the SDK's
// lifecycle calls.
async function quickstart(pause = true) {
  const { Sandbox } = require("@e2b/code-interpreter");
  const out = {};
  const sbx = await Sandbox.create({ metadata: { suite: "e2e-e2b-js" }, timeoutMs: 120_000 });
  try {
    await interpreterQuickstart(sbx, out);

    // Variables for one execution, JavaScript's too: then gone.
    const env = "process.env.A2E_RUN ?? 'unset'";
    out.run_code_envs = [
      (await sbx.runCode(env, { language: "js", envs: { A2E_RUN: "per run" } })).text,
      (await sbx.runCode(env, { language: "js" })).text,
    ];

    // A background command, connected to by pid (which streams its
    // output from then on, as E2B's) and killed.
    const bg = await sbx.commands.run("while :; do echo tick; sleep 0.1; done", { background: true });
    let seen = "";
    const again = await sbx.commands.connect(bg.pid, { onStdout: (d) => (seen += d) });
    for (let i = 0; i < 100 && !seen.includes("tick\n"); i++) await new Promise((r) => setTimeout(r, 100));
    out.connected_stdout = seen.includes("tick\n");
    out.killed = await sbx.commands.kill(bg.pid);
    out.killed_wait = await again.wait().then(
      (r) => `exit ${r.exitCode}`,
      (e) => `${e.constructor.name} ${e.exitCode}`,
    );
    out.listed_after = (await sbx.commands.list()).length;

    // A non-zero exit is the SDK's own error.
    out.exit = await sbx.commands.run("echo bad >&2; exit 3").then(
      () => null,
      (e) => [e instanceof e2b.CommandExitError, e.exitCode, e.stderr],
    );

    const mine = await Sandbox.list({ query: { metadata: { suite: "e2e-e2b-js" } } }).nextItems();
    out.listed = mine.map((s) => s.sandboxId === sbx.sandboxId);
    out.listed_other = (await Sandbox.list({ query: { metadata: { suite: "other" } } }).nextItems()).length;

    await sbx.setTimeout(600_000);
    const info = await sbx.getInfo();
    out.timeout_extended = info.endAt - info.startedAt > 300_000;
    out.info_metadata = info.metadata;
    out.info_template = info.templateId;
    out.metrics = (await sbx.getMetrics()).map((m) => [m.cpuCount >= 1, m.memUsed > 0 && m.memUsed < m.memTotal]);

    if (pause) {
      out.paused = await sbx.pause();
      out.state = (await sbx.getInfo()).state;
      const resumed = await Sandbox.connect(sbx.sandboxId);
      out.resumed_state = (await resumed.getInfo()).state;
      out.x_after_resume = (await resumed.runCode("x")).text;
      out.file_after_resume = await resumed.files.read("hello.txt");
    }
  } finally {
    out.kill = await sbx.kill();
  }
  out.running_after_kill = await sbx.isRunning();
  return out;
}

// interpreterQuickstart runs the code interpreter's README quickstart in
// sbx.
async function interpreterQuickstart(sbx, out) {
  await sbx.runCode("x = 1");
  out.text = (await sbx.runCode("x+=1; x")).text;
  const chart = await sbx.runCode(
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
  );
  out.png_prefix = chart.results.find((r) => r.png)?.png.slice(0, 8) ?? null;
  await sbx.files.write("hello.txt", "Hello World");
  out.read = await sbx.files.read("hello.txt");
  out.stdout = (await sbx.commands.run("echo hi")).stdout;
}

// interpreter runs only the code interpreter's quickstart (the oldest
// @e2b/code-interpreter).
async function interpreter() {
  const { Sandbox } = require("@e2b/code-interpreter");
  const out = {};
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  try {
    await interpreterQuickstart(sbx, out);
  } finally {
    out.kill = await sbx.kill(); // the oldest SDKs answer nothing
  }
  out.running_after_kill = await sbx.isRunning();
  return out;
}

// base runs the base SDK's quickstart.
async function base() {
  const out = {};
  const sbx = await e2b.Sandbox.create("base", { timeoutMs: 120_000 });
  try {
    const ran = await sbx.commands.run("echo hi; pwd");
    out.run = [ran.stdout, ran.exitCode];
    await sbx.files.write("/tmp/a.txt", "hello");
    out.read = await sbx.files.read("/tmp/a.txt");
  } finally {
    out.kill = await sbx.kill(); // the oldest SDKs answer nothing
  }
  out.running_after_kill = await sbx.isRunning();
  return out;
}

// failure runs create and reports how it failed and how long it took.
async function failure(opts) {
  const start = performance.now();
  try {
    const sbx = await e2b.Sandbox.create(opts.template ?? "base", opts);
    await sbx.kill();
    return { name: null };
  } catch (e) {
    return { name: e.constructor.name, message: String(e.message), seconds: (performance.now() - start) / 1000 };
  }
}

const modes = {
  quickstart,
  "quickstart-nopause": () => quickstart(false),
  interpreter,
  base,
  badkey: () => failure({ apiKey: "e2b_wrong-key-0123456789" }),
  badtemplate: () => failure({ template: "no-such-template" }),
};
let out;
try {
  out = await modes[mode]();
} catch (err) {
  out = { error: String(err?.stack ?? err) };
}
console.log(JSON.stringify(out));
