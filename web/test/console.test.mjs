// The web console in a real browser: Debian's chromium driven by
// playwright-core, against a running daemon with API keys on. Run by the
// Go test TestConsoleInBrowser (internal/e2e), which starts the daemon and
// sets CONSOLE_URL, API_URL, API_KEY, IMAGE, CHROMIUM and SCREENSHOT_DIR.
import assert from "node:assert/strict";
import os from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through go test -run TestConsoleInBrowser ./internal/e2e`);
  return v;
};
const consoleURL = env("CONSOLE_URL");
const key = env("API_KEY");
const image = env("IMAGE");
const shots = env("SCREENSHOT_DIR");

let browser, page;
// Whether the next confirmation is cancelled (every other is accepted).
let dismissNext = false;
// What the page reports that a test must not see: CSP violations, errors.
const problems = [];
// The requests the daemon answered with a 5xx, which the page reports as a
// bare "Failed to load resource": the final check names them.
const failed = [];

before(async () => {
  // --no-sandbox: the tests run as root, where chromium's own sandbox
  // cannot start.
  browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on("console", (m) => m.type() === "error" && !/status of 401/.test(m.text()) && problems.push(m.text()));
  page.on("pageerror", (e) => problems.push(String(e)));
  page.on("response", (r) => r.status() >= 500 && failed.push(`${r.request().method()} ${r.url()}: ${r.status()}`));
  page.on("dialog", (d) => (dismissNext ? ((dismissNext = false), d.dismiss()) : d.accept()));
});

after(async () => {
  await browser?.close();
});

/** A link of the main navigation. */
const nav = (name) => page.getByRole("navigation", { name: "main" }).getByRole("link", { name, exact: true });

/** Waits until locator matches exactly n elements. */
async function expectCount(locator, n, timeout = 180_000) {
  const until = Date.now() + timeout;
  while ((await locator.count()) !== n) {
    if (Date.now() > until) assert.fail(`${n} elements expected, ${await locator.count()} found`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Waits until the texts of locator's elements are want, in order. */
async function expectTexts(locator, want, timeout = 30_000) {
  const until = Date.now() + timeout;
  for (;;) {
    const got = await locator.allTextContents();
    if (JSON.stringify(got) === JSON.stringify(want)) return;
    if (Date.now() > until) assert.deepEqual(got, want);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Waits until a line of the terminal reads text. */
function terminalLine(text) {
  return page.waitForFunction(
    (t) => [...document.querySelectorAll(".xterm-rows > div")].some((r) => r.textContent.trim() === t),
    text,
    { timeout: 30_000 },
  );
}

async function shot(name) {
  const path = join(shots, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot ${path}`);
}

test("the key prompt refuses a wrong key and takes the right one", async () => {
  await page.goto(consoleURL + "/");
  await page.getByLabel("API key").waitFor();
  await shot("login");
  await page.getByLabel("API key").fill("wrong-key");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("refused the key").waitFor();
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Overview" }).waitFor();
  await page.getByText("Capacity").waitFor();
  await shot("overview");
  // The key is in this tab's sessionStorage, and in no cookie.
  assert.equal(await page.evaluate(() => sessionStorage.getItem("agent2env.key")), key);
  assert.deepEqual(await page.context().cookies(), []);
});

test("a sandbox created from the console runs a command and its output is text", async () => {
  await nav("Sandboxes").click();
  await page.getByText("No sandboxes yet").waitFor();
  await shot("sandboxes-empty");
  await page.getByLabel("image").fill(image);
  await page.getByRole("button", { name: "Create sandbox" }).click();
  await page.waitForURL(/\/sandboxes\/[^/]+$/);
  await page.locator(".status-running").first().waitFor({ timeout: 120_000 });

  // What a program in the sandbox prints is shown as it is: a script
  // element in it is text, and never runs.
  const xss = "<script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\">";
  await page.getByLabel("command").fill(`printf '%s' '${xss}'`);
  await page.getByRole("button", { name: "Run", exact: true }).click();
  const stdout = page.getByLabel("stdout");
  await stdout.waitFor();
  assert.equal(await stdout.textContent(), xss);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(await page.locator("main script, main img").count(), 0);
  await shot("sandbox");
});

test("the terminal runs echo hi, and follows the page's size", async () => {
  // Its code, loaded when it opens, gone (the daemon was updated since
  // the page was loaded): what to do is said.
  const logged = problems.length;
  await page.route(/\/assets\/terminal-[^/]*\.js$/, (route) => route.fulfill({ status: 404, body: "not found" }));
  await page.reload();
  await page.getByRole("button", { name: "Open terminal" }).click();
  await page.getByRole("alert").filter({ hasText: "reload the page" }).waitFor();
  await page.unrouteAll();
  await page.getByRole("alert").getByRole("button", { name: "Try again" }).click();
  await page.locator(".status-running").first().waitFor();
  assert.ok(problems.splice(logged).every((p) => /status of 404/.test(p)));
  await page.getByRole("button", { name: "Open terminal" }).click();
  await page.locator(".term-connected").waitFor({ timeout: 30_000 });
  await page.locator(".xterm-helper-textarea").focus();
  await page.keyboard.type("echo hi\r");
  // The command's output on a line of its own (the echoed input has it
  // after the command).
  await terminalLine("hi");
  await shot("terminal");
  // Its size follows the page's: a narrower page, fewer columns.
  const size = async (mark) => {
    await page.keyboard.type(`stty size | sed s/^/${mark}:/\r`);
    const h = await page.waitForFunction(
      (re) =>
        [...document.querySelectorAll(".xterm-rows > div")].map((r) => r.textContent.trim()).find((t) => new RegExp(re).test(t)),
      `^${mark}:\\d+ \\d+$`,
      { timeout: 30_000 },
    );
    return Number((await h.jsonValue()).split(" ")[1]);
  };
  const wide = await size("wide");
  await page.setViewportSize({ width: 800, height: 800 });
  await page.waitForTimeout(300); // the resize observer, then the resize frame
  const narrow = await size("narrow");
  await page.setViewportSize({ width: 1280, height: 800 });
  assert.ok(narrow < wide, `columns ${wide} on a wide page, ${narrow} on a narrower one`);
  await page.getByRole("button", { name: "Close" }).click();
});

test("the terminal keeps Tab for the shell, and Ctrl+M makes Tab move the focus out of it: no keyboard trap", async () => {
  await page.getByRole("button", { name: "Open terminal" }).click();
  await page.locator(".term-connected").waitFor({ timeout: 30_000 });
  const input = page.locator(".xterm-helper-textarea");
  await input.focus();
  const inTerminal = () => page.evaluate(() => document.activeElement?.classList.contains("xterm-helper-textarea") ?? false);
  // The way out is said above the terminal, and describes its input.
  const described = await input.getAttribute("aria-describedby");
  assert.ok(described, "the terminal's input is described by nothing");
  const hint = page.locator(`[id="${described}"]`);
  assert.equal(await hint.textContent(), "Tab goes to the shell; Ctrl+M makes it move the focus out of the terminal.");
  const toggle = page.getByRole("button", { name: "Tab moves focus" });
  assert.equal(await toggle.getAttribute("aria-pressed"), "false");
  // Tab goes to the shell: a line read holds it, and Ctrl+M, pressed
  // twice in between, sent nothing (not the carriage return ^M is). The
  // line is typed once the shell has handed the terminal to the command
  // (typed before, the shell's line editor would take it raw, its Enter a
  // carriage return that ends no line).
  const readLine = async (mark) => {
    await page.keyboard.type(`echo ${mark}-reading; IFS= read -r x; echo "${mark}:\${#x}"\r`);
    await terminalLine(`${mark}-reading`);
  };
  await readLine("got");
  await page.keyboard.press("Control+m");
  await page.keyboard.press("Control+m");
  await page.keyboard.press("Tab");
  assert.ok(await inTerminal(), "Tab left the terminal");
  await page.keyboard.type("z\r");
  await terminalLine("got:2");
  // Ctrl+M: Tab moves the focus on, Shift+Tab back.
  await page.keyboard.press("Control+m");
  assert.equal(await hint.textContent(), "Tab moves the focus out of the terminal; Ctrl+M gives it back to the shell.");
  assert.equal(await toggle.getAttribute("aria-pressed"), "true");
  await page.keyboard.press("Tab");
  assert.ok(await page.evaluate(() => !document.activeElement?.closest(".terminal")), "Tab stayed in the terminal");
  await page.keyboard.press("Shift+Tab");
  assert.ok(await inTerminal(), "Shift+Tab did not come back to the terminal");
  // And back: Tab goes to the shell again.
  await page.keyboard.press("Control+m");
  await readLine("again");
  await page.keyboard.press("Tab");
  await page.keyboard.type("z\r");
  await terminalLine("again:2");
  assert.ok(await inTerminal());
  // The button toggles it too.
  await toggle.click();
  assert.equal(await toggle.getAttribute("aria-pressed"), "true");
  await page.getByRole("button", { name: "Close" }).click();
});

test("files: folders opened by a click, a file uploaded into the folder shown and downloaded with the same bytes", async () => {
  await page.getByLabel("command").fill("mkdir -p /workspace/sub/deep && printf x > /workspace/sub/a.txt");
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await page.getByLabel("stdout").waitFor();
  await page.getByLabel("directory", { exact: true }).fill("/workspace");
  await page.getByRole("button", { name: "Go", exact: true }).click();
  const listing = (dir) => page.getByRole("table", { name: `files in ${dir}` });
  await listing("/workspace").getByRole("button", { name: "open folder sub" }).click();
  const sub = listing("/workspace/sub");
  await sub.getByRole("button", { name: "open folder deep" }).waitFor();
  await sub.getByText("a.txt", { exact: true }).waitFor();
  assert.equal(await page.getByLabel("directory", { exact: true }).inputValue(), "/workspace/sub");

  const content = Buffer.from("hello from the console\n\u00e9\u0000\xff");
  await page.getByLabel("file to upload").setInputFiles({ name: "hello.bin", mimeType: "application/octet-stream", buffer: content });
  await page.getByRole("button", { name: "Upload into /workspace/sub", exact: true }).click();
  await page.getByRole("status").getByText("Uploaded /workspace/sub/hello.bin.").waitFor();
  const row = sub.locator("tr").filter({ hasText: "hello.bin" });
  await row.getByText(`${content.length} B`).waitFor();
  await shot("files");
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    row.getByRole("button", { name: "download hello.bin" }).click(),
  ]);
  assert.equal(download.suggestedFilename(), "hello.bin");
  const chunks = [];
  for await (const c of await download.createReadStream()) chunks.push(c);
  assert.deepEqual(Buffer.concat(chunks), content);

  await page.getByRole("button", { name: "Up", exact: true }).click();
  await listing("/workspace").getByRole("button", { name: "open folder sub" }).waitFor();
  // A directory that is not there, and a file that is not a directory,
  // say so (and the browser logs the 404 and the 400).
  const logged = problems.length;
  await page.getByLabel("directory", { exact: true }).fill("/workspace/nothing");
  await page.getByRole("button", { name: "Go", exact: true }).click();
  await page.getByRole("alert").getByText("FILE_NOT_FOUND").waitFor();
  await page.getByLabel("directory", { exact: true }).fill("/workspace/sub/a.txt");
  await page.getByRole("button", { name: "Go", exact: true }).click();
  await page.getByRole("alert").filter({ hasText: "not a directory" }).waitFor();
  assert.deepEqual(problems.splice(logged), [
    "Failed to load resource: the server responded with a status of 404 (Not Found)",
    "Failed to load resource: the server responded with a status of 400 (Bad Request)",
  ]);
  await page.getByLabel("directory", { exact: true }).fill("/workspace");
  await page.getByRole("button", { name: "Go", exact: true }).click();
  await listing("/workspace").waitFor();
});

test("files: a folder typed relative to the working directory, or not clean, is shown by the absolute path the sandbox resolved", async () => {
  await page.getByLabel("command").fill("mkdir -p rel/inner && pwd");
  await page.getByRole("button", { name: "Run", exact: true }).click();
  const stdout = page.getByLabel("stdout").filter({ hasText: /^\// });
  await stdout.waitFor();
  const wd = (await stdout.textContent()).trim();
  const dir = page.getByLabel("directory", { exact: true });
  const go = async (typed, shown) => {
    await dir.fill(typed);
    await page.getByRole("button", { name: "Go", exact: true }).click();
    // What was typed is replaced by the path listed.
    await page.waitForFunction((v) => document.querySelector('input[aria-label="directory"]').value === v, shown, { timeout: 10_000 });
    await page.getByRole("button", { name: `Upload into ${shown}`, exact: true }).waitFor();
  };
  await go(".", wd);
  await page.getByRole("table", { name: `files in ${wd}`, exact: true }).getByRole("button", { name: "open folder rel" }).waitFor();
  const inner = `${wd === "/" ? "" : wd}/rel/inner`;
  await go("rel/inner/", inner);
  await page.getByText(`${inner} is empty: upload a file into it below.`, { exact: true }).waitFor();
  await go("/workspace/sub//deep/.", "/workspace/sub/deep");
  await page.getByRole("button", { name: "Up", exact: true }).click();
  await page.getByRole("table", { name: "files in /workspace/sub", exact: true }).waitFor();
  // A folder that is not there is said to be one (a 404 the browser logs).
  const logged = problems.length;
  await dir.fill("rel/none");
  await page.getByRole("button", { name: "Go", exact: true }).click();
  const alert = page.getByRole("alert").filter({ hasText: "FILE_NOT_FOUND" });
  await alert.getByText("There is no folder at this path in the sandbox: type another path, or go Up.").waitFor();
  assert.doesNotMatch(await alert.textContent(), /deleted/);
  assert.deepEqual(problems.splice(logged), ["Failed to load resource: the server responded with a status of 404 (Not Found)"]);
  await go("/workspace", "/workspace");
});

test("a snapshot taken on the sandbox's page makes a new sandbox that runs on from it; the snapshots page lists it", async () => {
  const parentURL = page.url();
  const parent = decodeURIComponent(new URL(parentURL).pathname.split("/").pop());
  await page.getByLabel("command").fill("echo saved > /workspace/snap.txt; setsid sleep 1000 </dev/null >/dev/null 2>&1 &");
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await page.getByLabel("stdout").waitFor();
  const mine = page.getByRole("table", { name: "snapshots" }).locator("tbody tr");
  await page.getByText("No snapshots of this sandbox.").waitFor();
  await page.getByRole("button", { name: "Snapshot", exact: true }).click();
  await expectCount(mine, 1, 60_000);
  const snap = (await mine.locator("code").first().textContent()).trim();
  // Live: the sandbox runs on.
  await page.locator(".status-running").first().waitFor();
  await shot("sandbox-snapshots");

  await mine.getByRole("button", { name: `new sandbox from ${snap}` }).click();
  await page.waitForURL((u) => /\/sandboxes\/[^/]+$/.test(u.pathname) && !u.pathname.endsWith("/" + parent));
  const child = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
  await page.locator(".status-running").first().waitFor({ timeout: 60_000 });
  // Its file, and the process the parent had started, are there.
  await page.getByLabel("command").fill("cat /workspace/snap.txt; grep -lx sleep /proc/[0-9]*/comm >/dev/null && echo sleeping");
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await page.getByLabel("stdout").waitFor();
  assert.equal(await page.getByLabel("stdout").textContent(), "saved\nsleeping\n");

  await nav("Snapshots").click();
  const all = page.getByRole("table", { name: "snapshots" });
  const row = all.locator("tbody tr").filter({ hasText: snap });
  await row.getByRole("link", { name: parent }).waitFor();
  await shot("snapshots");
  // The new sandbox goes; the snapshot stays until it is deleted, from
  // its sandbox's page.
  await api("DELETE", `/api/v1/sandboxes/${child}`);
  await row.getByRole("link", { name: parent }).click();
  await page.waitForURL(parentURL);
  await mine.getByRole("button", { name: `delete ${snap}` }).click();
  await page.getByText("No snapshots of this sandbox.").waitFor();
  await nav("Snapshots").click();
  await page.getByText("No snapshots yet").waitFor();
  await page.goto(parentURL);
  await page.locator(".status-running").first().waitFor();
});

test("the sandboxes list shows it; it is paused, resumed, stopped, started and deleted from its page", async () => {
  const id = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
  await nav("Sandboxes").click();
  await page.getByRole("link", { name: id }).waitFor();
  await shot("sandboxes");
  // The status filter is the server's: one request a page, with status.
  const asked = page.waitForRequest((r) => /\/api\/v1\/sandboxes\?.*status=failed/.test(r.url()));
  await page.getByLabel("Status").selectOption("failed");
  await asked;
  await page.getByText("No sandbox is failed.").waitFor();
  await page.getByLabel("Status").selectOption("running");
  await page.getByRole("link", { name: id }).waitFor();
  assert.match(page.url(), /status=running/);
  await page.getByRole("link", { name: id }).click();
  // Its id is copied by a button; its times are relative, absolute on hover.
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: consoleURL });
  await page.getByRole("button", { name: `copy ${id}` }).click();
  await page.getByRole("button", { name: `copy ${id}` }).getByText("copied").waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), id);
  const created = page.locator("dl.info time").first();
  assert.match(await created.textContent(), /ago|now/);
  assert.match(await created.getAttribute("title"), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  const restarted = page.waitForResponse((r) => r.url().endsWith(`/sandboxes/${id}/restart`) && r.request().method() === "POST");
  await page.getByRole("button", { name: "Restart" }).click();
  assert.equal((await restarted).status(), 200);
  // A terminal open across a pause, and a read of the sandbox that
  // fails: its shell goes on, on the same connection.
  await page.getByRole("button", { name: "Open terminal" }).click({ timeout: 30_000 });
  await page.locator(".term-connected").waitFor({ timeout: 30_000 });
  const sockets = [];
  page.on("websocket", (ws) => sockets.push(ws.url()));
  await page.locator(".xterm-helper-textarea").focus();
  await page.keyboard.type("X=kept\r");
  await page.getByRole("button", { name: "Pause" }).click({ timeout: 30_000 });
  await page.locator(".status-paused").first().waitFor({ timeout: 30_000 });
  await page.getByText("Paused: the terminal goes on when the sandbox is resumed.").waitFor();
  await page.getByRole("button", { name: "Resume" }).click();
  await page.locator(".status-running").first().waitFor({ timeout: 30_000 });
  let failedRead = false;
  const busy = { status: 503, contentType: "application/json", body: '{"error":"the daemon is busy","code":"UNAVAILABLE"}' };
  await page.route(new RegExp(`/api/v1/sandboxes/${id}$`), (route) =>
    failedRead ? route.continue() : ((failedRead = true), route.fulfill(busy)),
  );
  await page.getByRole("alert").filter({ hasText: "the daemon is busy" }).waitFor({ timeout: 10_000 });
  await page.getByRole("alert").filter({ hasText: "the daemon is busy" }).waitFor({ state: "detached", timeout: 10_000 });
  await page.unrouteAll();
  assert.deepEqual(problems.splice(-1), ["Failed to load resource: the server responded with a status of 503 (Service Unavailable)"]);
  assert.deepEqual(failed.splice(-1), [`GET ${env("API_URL")}/api/v1/sandboxes/${id}: 503`]);
  await page.locator(".xterm-helper-textarea").focus();
  await page.keyboard.type("echo two-$X\r");
  await terminalLine("two-kept");
  assert.deepEqual(sockets, []);
  await page.getByRole("button", { name: "Close" }).click();
  await page.getByRole("button", { name: "Stop" }).click();
  await page.getByRole("button", { name: "Start" }).click({ timeout: 30_000 });
  await page.locator(".status-running").first().waitFor({ timeout: 30_000 });
  // A delete cancelled changes nothing: the buttons stay on, at once.
  dismissNext = true;
  await page.getByRole("button", { name: "Delete" }).click();
  assert.equal(dismissNext, false, "no confirmation was asked");
  assert.ok(await page.getByRole("button", { name: "Stop" }).isEnabled(), "the buttons went off after a cancelled delete");
  await page.locator(".status-running").first().waitFor();
  await page.getByRole("button", { name: "Delete" }).click();
  await page.waitForURL(/\/sandboxes$/);
  await page.getByText("No sandboxes yet").waitFor();
});

test("a task run's events arrive live, and what its agent wrote is text", async () => {
  // Submitted as a program would; watched in the console from the start.
  const said = "<script>window.__xss = 3</script><b>bold</b>";
  const task = [
    "name: console-hello",
    `image: ${image}`,
    "agent: custom",
    "goal: say hello",
    `entrypoint: ${JSON.stringify(`sleep 2; printf '%s\\n' '${said}'; echo done > /workspace/done.txt`)}`,
    "end:",
    "  success_file: /workspace/done.txt",
    "artifacts: [/workspace/done.txt]",
  ].join("\n");
  const resp = await fetch(env("API_URL") + "/api/v1/runs", {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ task }),
  });
  assert.equal(resp.status, 201, await resp.clone().text());
  const run = (await resp.json()).runs[0];
  await nav("Runs").click();
  await page.getByRole("link", { name: run.id }).click();
  await page.getByRole("heading", { name: /^Run/ }).waitFor();
  // The page follows the run while it goes: its first events came before
  // it ended.
  await page.locator(".ev-phase").first().waitFor({ timeout: 60_000 });
  const endedBefore = await page.locator(".ev-end").count();
  await page.locator(".ev-end").waitFor({ timeout: 120_000 });
  await page.locator(".status-succeeded").first().waitFor({ timeout: 10_000 });
  assert.equal(endedBefore, 0, "the run had ended before the page showed its first event: nothing was live");
  await page.getByText(said, { exact: true }).waitFor();
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(await page.locator("main script, main b").count(), 0);
  // What a phase said: how many artifacts came back.
  await page.locator(".ev-phase").filter({ hasText: "phase artifacts: 1 artifacts collected" }).waitFor();
  // Its artifact downloaded, alone and in the tar archive of them all.
  const downloaded = async (button) => {
    const [d] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: button }).click()]);
    const chunks = [];
    for await (const c of await d.createReadStream()) chunks.push(c);
    return [d.suggestedFilename(), Buffer.concat(chunks)];
  };
  const [name, body] = await downloaded("download /workspace/done.txt");
  assert.deepEqual([name, body.toString()], ["done.txt", "done\n"]);
  const [tarName, tar] = await downloaded("Download all (tar)");
  assert.equal(tarName, `${run.id}-artifacts.tar`);
  assert.equal(tar.subarray(0, 100).toString().replace(/\0+$/, ""), "workspace/done.txt");
  await shot("run");
  await nav("Runs").click();
  await page.getByRole("link", { name: run.id }).waitFor();
  await shot("runs");
  // Filtered by status on the server.
  const asked = page.waitForRequest((r) => /\/api\/v1\/runs\?.*status=failed/.test(r.url()));
  await page.getByLabel("Status").selectOption("failed");
  await asked;
  await page.getByText("No run is failed.").waitFor();
  await page.getByLabel("Status").selectOption("succeeded");
  await page.getByRole("link", { name: run.id }).waitFor();
});

// The agent: two turns of one conversation with the run's model through
// the LLM proxy, answering the model's tool call in between.
const askScript = `import json, os, urllib.request
base, model = os.environ["OPENAI_BASE_URL"], os.environ["AGENT2ENV_MODEL"]
def ask(messages):
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps({"model": model, "messages": messages}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    return json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]
messages = [{"role": "user", "content": "fix the bug"}]
m = ask(messages)
call = m["tool_calls"][0]
messages += [m, {"role": "tool", "tool_call_id": call["id"], "content": "sandbox-host"}]
print(ask(messages)["content"])
open("/workspace/done.txt", "w").write("ok")
`;

/**
 * A task whose custom agent runs askScript with the model MODEL, then the
 * shell command then, if given. For another agent the entrypoint is a
 * start script run before the agent's CLI, without AGENT2ENV_MODEL: it
 * does nothing.
 */
function askTask(name, then = "") {
  return [
    `name: ${name}`,
    `image: ${image}`,
    "agent: custom",
    `model: ${env("MODEL")}`,
    "goal: ask the model",
    `entrypoint: ${JSON.stringify(`[ -n "\${AGENT2ENV_MODEL-}" ] || exit 0; python3 -c ${shellQuote(askScript)}${then ? ` && ${then}` : ""}`)}`,
    "end: {timeout: 2m, success_file: /workspace/done.txt}",
  ].join("\n");
}

test("a run's conversation: the tool call paired with its result, the model's markup as text, the raw parts", async () => {
  const run = (await api("POST", "/api/v1/runs", { task: askTask("console-ask") })).runs[0];
  await page.goto(`${consoleURL}/runs/${run.id}`);
  await page.locator(".ev-end").waitFor({ timeout: 120_000 });
  await page.locator(".status-succeeded").first().waitFor({ timeout: 10_000 });
  await page.getByRole("link", { name: "its conversations" }).click();
  await page.locator("table.exchanges tbody tr.x").first().waitFor();
  await shot("conversations");
  await page.getByRole("button", { name: "Show transcript" }).click();
  const transcript = page.getByRole("list", { name: "transcript" });
  await transcript.waitFor();
  // The call, its arguments, and under it its result.
  const tool = transcript.locator(".part-tool");
  await tool.getByText("tool call read_file").waitFor();
  assert.match(await tool.textContent(), /"path": "\/etc\/hostname"[\s\S]*result[\s\S]*sandbox-host/);
  const says = env("MODEL_SAYS");
  await transcript.getByText(says, { exact: true }).waitFor();
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(await page.locator("main script, main i").count(), 0);
  await shot("conversation");
  // Raw: the answer the client got, byte for byte as the archive has it.
  const last = page.locator("table.exchanges tbody tr.x").last();
  const id = (await last.locator("code").textContent()).trim();
  await last.getByRole("button", { name: `raw parts of ${id}` }).click();
  const shown = await page.locator('pre[data-part="response"]').textContent();
  const archived = await (
    await fetch(`${env("API_URL")}/api/v1/llm/exchanges/${id}?raw=response`, { headers: { Authorization: `Bearer ${key}` } })
  ).text();
  assert.equal(shown, archived);
  assert.ok(archived.includes("window.__xss = 4"), archived);
  await shot("conversation-raw");
});

/** s as one shell word. */
function shellQuote(s) {
  return "'" + s.replaceAll("'", "'\\''") + "'";
}

/** The API's answer to a request of the test's own (not the console's). */
async function api(method, path, body) {
  const resp = await fetch(env("API_URL") + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  assert.ok(resp.ok, `${method} ${path}: ${resp.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

test("templates: imported from YAML, their versions, each version's YAML, a rollback", async () => {
  await nav("Templates").click();
  await page.getByText("No templates yet").waitFor();
  const doc = (ttl) =>
    `apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n  name: console-tpl\n  description: made in the console\nspec:\n  image: ${image}\n  ttl: ${ttl}\n`;
  await page.getByText("Import from YAML").click();
  const importAs = async (ttl, result) => {
    await page.getByLabel("template YAML", { exact: true }).fill(doc(ttl));
    await page.getByRole("button", { name: "Import", exact: true }).click();
    await page.getByRole("status").filter({ hasText: result }).waitFor();
  };
  await importAs(600, "console-tpl: created (v1)");
  await importAs(900, "console-tpl: updated (v2)");
  await page.getByRole("link", { name: "console-tpl" }).first().waitFor();
  await shot("templates");
  await page.locator("table.list").getByRole("link", { name: "console-tpl" }).click();
  await page.getByRole("heading", { name: /^Template console-tpl/ }).waitFor();
  const yaml = page.getByLabel("template YAML export");
  await yaml.filter({ hasText: "ttl: 900" }).waitFor();
  assert.match(await yaml.textContent(), /name: console-tpl[\s\S]*image: agent2env\/python/);
  // The first version's YAML, then back to it.
  const v1 = page.locator("table.versions tbody tr").filter({ hasText: "v1" });
  await v1.getByRole("button", { name: "YAML" }).click();
  await yaml.filter({ hasText: "ttl: 600" }).waitFor();
  await shot("template");
  // What changed from v1 to v2, line by line.
  await v1.getByRole("button", { name: "Diff v1 with v2" }).click();
  const diff = page.getByLabel("template YAML diff");
  await diff.locator(".diff-del").filter({ hasText: "ttl: 600" }).waitFor();
  await diff.locator(".diff-add").filter({ hasText: "ttl: 900" }).waitFor();
  assert.equal(await diff.locator(".diff-del, .diff-add").count(), 2);
  await shot("template-diff");
  await v1.getByRole("button", { name: "Roll back to v1" }).click();
  await page.locator("table.versions tbody td:first-child").getByText("v3", { exact: true }).waitFor();
  await page.getByText("v3", { exact: true }).first().waitFor();
  await yaml.filter({ hasText: "ttl: 600" }).waitFor();
  // Rolled back while the latest's YAML is shown: the new latest's YAML.
  await page.locator("table.versions tbody tr").filter({ hasText: "v2" }).getByRole("button", { name: "Roll back to v2" }).click();
  await page.getByRole("heading", { name: "YAML of v4" }).waitFor();
  await yaml.filter({ hasText: "ttl: 900" }).waitFor();
  // A document that is not YAML is refused, saying why.
  await nav("Templates").click();
  await page.getByText("Import from YAML").click();
  await page.getByLabel("template YAML", { exact: true }).fill("{not yaml");
  const logged = problems.length;
  await page.getByRole("button", { name: "Import", exact: true }).click();
  await page.getByRole("alert").getByText("INVALID_YAML").waitFor();
  assert.deepEqual(problems.splice(logged), ["Failed to load resource: the server responded with a status of 400 (Bad Request)"]);
});

test("a template that does not exist is said to be one, not one that may have been deleted", async () => {
  const logged = problems.length;
  await page.goto(consoleURL + "/templates/no-such-template");
  const alert = page.getByRole("alert").filter({ hasText: "TEMPLATE_NOT_FOUND" });
  await alert.getByText("There is no template of this name: the Templates page lists those there are.").waitFor();
  assert.doesNotMatch(await alert.textContent(), /deleted/);
  // The browser logs the 404s of the template and of its versions.
  const logs = problems.splice(logged);
  assert.ok(logs.length > 0 && logs.every((p) => /status of 404/.test(p)), logs.join("\n"));
});

test("a copy button without the clipboard API (plain http, not localhost) copies by selection, or says to press the keys", async () => {
  await page.goto(consoleURL + "/templates/console-tpl");
  const copy = page.getByRole("button", { name: /^copy tpl/ });
  await copy.waitFor();
  const id = (await copy.getAttribute("aria-label")).slice("copy ".length);
  // As outside a secure context: no navigator.clipboard.
  await page.evaluate(() => {
    Object.defineProperty(navigator, "clipboard", { value: undefined, configurable: true });
    document.addEventListener("copy", () => (window.__copied = getSelection().toString()));
  });
  await copy.click();
  await copy.getByText("copied").waitFor();
  assert.equal(await page.evaluate(() => window.__copied), id);
  assert.equal(await page.evaluate(() => getSelection().toString()), "");
  // The browser's Copy command refused too: the id is left selected, and
  // what to do is said.
  await page.evaluate(() => (document.execCommand = () => false));
  await copy.click();
  await page.getByRole("status").filter({ hasText: /^selected: press (Ctrl\+C|\u2318C) to copy it$/ }).waitFor();
  assert.equal(await copy.textContent(), "copy");
  assert.equal(await page.evaluate(() => getSelection().toString()), id);
  await page.reload();
});

test("images: the stored ones, and a prepull followed to its end", async () => {
  await nav("Images").click();
  await page.locator("table.images").getByText(`${image}:latest`, { exact: true }).waitFor();
  await page.getByText("No prepull tasks").waitFor();
  await page.getByLabel("image to prepull").fill(image);
  await page.getByRole("button", { name: "Prepull" }).click();
  const row = page.locator("table.prepulls tbody tr").filter({ hasText: image });
  await row.locator(".status-completed").waitFor({ timeout: 60_000 });
  const bar = row.getByRole("progressbar");
  assert.equal(await bar.getAttribute("value"), "100");
  await shot("images");
  await row.getByRole("button", { name: `remove the prepull of ${image}` }).click();
  await page.getByText("No prepull tasks").waitFor();
});

test("sessions and contexts: listed, a session's contexts, a context deleted, a session stopped", async () => {
  // A session as an SDK makes one, and a context in its sandbox.
  // Its id has a dot, as the API allows: its page's URL is still the app's.
  const sid = "console.session";
  const ran = await api("POST", "/api/v1/sessions/execute", { code: "print(6 * 7)", language: "python", session_id: sid });
  assert.equal(ran.session_id, sid, JSON.stringify(ran));
  const sess = await api("GET", `/api/v1/sessions/${sid}`);
  const ctx = await api("POST", `/api/v1/sandboxes/${sess.sandbox_id}/contexts`, { language: "python", name: "console-ctx" });
  await nav("Sessions").click();
  await page.getByRole("link", { name: sid }).waitFor();
  await page.locator("table.contexts").getByText(ctx.context_id).waitFor();
  await shot("sessions");
  await page.getByRole("link", { name: sid }).click();
  await page.getByRole("heading", { name: /^Session/ }).waitFor();
  await page.reload();
  await page.getByRole("heading", { name: /^Session/ }).waitFor();
  await page.locator("table.contexts").getByText(ctx.context_id).waitFor();
  await shot("session");
  await page.getByRole("button", { name: `delete context ${ctx.context_id}` }).click();
  await page.locator("table.contexts").getByText(ctx.context_id).waitFor({ state: "detached" });
  await page.getByRole("button", { name: "Stop session" }).click();
  await page.waitForURL(/\/sessions$/);
  await page.getByText("No sessions.").waitFor();
});

test("a submission's matrix: a row per agent, a cell per agent and model, a cell's runs, two transcripts side by side", async () => {
  // Two agents × two models, two runs each. The custom agent passes with
  // the model coder and fails with the other after the same conversation.
  // opencode is a real agent CLI, but not in this image (agent2env/agent
  // has it, and takes minutes to build): its runs fail at once, with the
  // reason (its CLI is not there) shown.
  const [good, bad] = [env("MODEL"), env("MODEL_B")];
  const task = askTask("console-compare", `[ "$AGENT2ENV_MODEL" = ${good} ] || { rm -f /workspace/done.txt; exit 3; }`);
  const b = await api("POST", "/api/v1/runs", { task, agents: ["custom", "opencode"], models: [good, bad], repeats: 2 });
  assert.equal(b.runs.length, 8);
  await page.goto(`${consoleURL}/runs?batch=${b.id}`);
  await page.getByRole("link", { name: "Compare agents × models" }).click();
  const matrix = page.getByRole("table", { name: "agents by models" });
  const row = (agent) => matrix.locator("tbody tr").filter({ has: page.getByRole("rowheader", { name: agent, exact: true }) });
  const cell = (agent, model) => matrix.getByRole("link", { name: `${agent} × ${model}`, exact: true });
  // Live until every run ended: then the figures are final.
  await row("custom").locator("td.cell").filter({ hasText: "2/2 passed" }).waitFor({ timeout: 180_000 });
  await row("custom").locator("td.cell").filter({ hasText: "0/2 passed" }).waitFor({ timeout: 180_000 });
  await expectCount(row("opencode").locator("td.cell").filter({ hasText: "0/2 passed" }), 2);
  assert.equal(await matrix.locator("tbody tr").count(), 2);
  assert.equal(await cell("custom", good).textContent(), "100%");
  assert.equal(await cell("custom", bad).textContent(), "0%");
  assert.equal(await cell("opencode", good).textContent(), "0%");
  assert.equal(await cell("opencode", bad).textContent(), "0%");
  assert.match(await row("custom").locator("td.cell").filter({ hasText: "0/2 passed" }).textContent(), /pass@1 0%, pass@2 0%/);
  assert.match(await row("custom").locator("td.cell").filter({ hasText: "2/2 passed" }).textContent(), /pass@1 100%, pass@2 100%/);
  await shot("compare");
  await cell("opencode", good).click();
  const failed = page.locator("table.cell-runs tbody tr");
  await failed.first().waitFor();
  assert.equal(await failed.locator(".status-failed").count(), 2);
  const why = await failed.locator(".reason").first().textContent();
  console.log(`opencode's runs failed: ${why}`);
  assert.match(why, /opencode|exited 127/);
  await page.goto(`${consoleURL}/runs/compare?batch=${b.id}`);
  await cell("custom", bad).click();
  const runs = page.locator("table.cell-runs tbody tr");
  await runs.first().waitFor();
  assert.equal(await runs.count(), 2);
  assert.equal(await runs.locator(".status-failed").count(), 2);
  const ids = await runs.locator("code").allTextContents();
  for (const id of ids) await page.getByLabel(`choose ${id}`).check();
  for (const id of ids) {
    const side = page.getByRole("article", { name: `transcript of ${id}` });
    await side.locator(".part-tool").getByText("tool call read_file").waitFor();
    await side.getByText(env("MODEL_SAYS"), { exact: true }).waitFor();
  }
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await shot("compare-transcripts");
});

test("the LLM archive: every exchange, a transcript opened on demand, new ones arriving live", async () => {
  await nav("LLM").click();
  await page.getByRole("heading", { name: "LLM archive" }).waitFor();
  await page.getByRole("status").getByText("live").waitFor();
  const rows = page.locator("table.exchanges tbody tr.x");
  await rows.first().waitFor();
  const before = await rows.count();
  assert.ok(before >= 6, `${before} exchanges listed`);
  // One request for the page: no request per row; bodies when opened.
  const perRow = [];
  page.on("request", (r) => /\/llm\/exchanges\/llx_/.test(r.url()) && perRow.push(r.url()));
  await page.waitForTimeout(500);
  assert.deepEqual(perRow, []);
  await shot("archive");
  // A new exchange arrives on the page while it is shown.
  const run = (await api("POST", "/api/v1/runs", { task: askTask("console-tail") })).runs[0];
  const ofRun = rows.filter({ hasText: `run ${run.id}` });
  await ofRun.nth(1).waitFor({ timeout: 120_000 });
  assert.equal(await rows.count(), before + 2);
  // Newest first: its second exchange, with the model's answer, on top.
  await ofRun.first().getByRole("button", { name: /^transcript of/ }).click();
  await page.getByRole("list", { name: "transcript" }).getByText(env("MODEL_SAYS"), { exact: true }).waitFor();
  assert.equal(perRow.length, 1, perRow.join("\n"));
  // Filtered on the server: a model no exchange used.
  await page.getByLabel("Model").fill("no-such-model");
  await page.getByRole("button", { name: "Filter" }).click();
  await page.getByText("No exchange matches the filters").waitFor();
  // The empty state says what to do.
  assert.match(await page.locator(".empty").textContent(), /without models configured, start the daemon with --llm-config/);
});

/** An exchange as the archive lists it, of an OpenAI chat completion: fields set the rest. */
const fakeExchange = (fields) => ({
  format: "openai",
  path: "/v1/chat/completions",
  model: "coder",
  stream: false,
  status: 200,
  state: "complete",
  timeToFirstByteMs: 120,
  durationMs: 900,
  ...fields,
});

/** An event stream's body of events, each [name, data, id]. */
const sse = (events) =>
  events.map(([name, data, id]) => `event: ${name}\n${id ? `id: ${id}\n` : ""}data: ${JSON.stringify(data)}\n\n`).join("");

test("the archive's live tail, cut by a daemon shutting down, goes on after its last event once it is back", async () => {
  // The first stream sends one exchange, then the error a daemon shutting
  // down sends; the second must resume after that exchange's id. Their
  // ids are far past any real one: the third, the daemon's own, waits.
  const exchange = (n) =>
    fakeExchange({ id: `llx_cut${n}`, sandboxId: "sb-cut", usage: { inputTokens: n, outputTokens: 1 }, createdAt: new Date().toISOString() });
  const [first, second] = ["9000000000000000001", "9000000000000000002"];
  // Told apart by where they resume: the page's first follows the list's
  // cursor; a stream of the page before (filtered by model) is left alone.
  const asked = [];
  // The stream after the cut is answered once the test has seen what the
  // page says while it waits for it: that it follows again, not that it
  // is live.
  let followedAgain, answer;
  const askedAgain = new Promise((resolve) => (followedAgain = resolve));
  const answered = new Promise((resolve) => (answer = resolve));
  await page.route(/\/api\/v1\/llm\/exchanges\/stream\?/, async (route) => {
    const q = new URL(route.request().url()).searchParams;
    if (q.has("model")) return route.continue();
    const after = q.get("after");
    asked.push(after);
    if (after === first) {
      followedAgain();
      await answered;
      return route.fulfill({ contentType: "text/event-stream", body: sse([["exchange", exchange(2), second]]) });
    }
    if (after === second) return route.continue();
    const down = { error: "the daemon is shutting down: follow again, after the last event's id, once it is back", code: "UNAVAILABLE" };
    return route.fulfill({ contentType: "text/event-stream", body: sse([["exchange", exchange(1), first], ["error", down]]) });
  });
  try {
    await page.goto(consoleURL + "/llm?within=0");
    const rows = page.locator("table.exchanges tbody tr.x");
    await rows.filter({ hasText: "llx_cut1" }).waitFor();
    await askedAgain;
    await page.getByRole("status").filter({ hasText: "again in a moment: the daemon is shutting down" }).waitFor({ timeout: 10_000 });
    assert.equal(await page.getByText("live: new exchanges appear at the top").count(), 0, "live before the stream was answered");
    answer();
    await rows.filter({ hasText: "llx_cut2" }).waitFor({ timeout: 10_000 });
    await page.getByRole("status").getByText("live").waitFor({ timeout: 10_000 });
    assert.deepEqual(asked.slice(1, 3), [first, second]);
    assert.equal(await page.getByText("[object Object]").count(), 0);
  } finally {
    answer();
    await page.unrouteAll();
  }
});

/**
 * An exchange made through the daemon's LLM proxy with the API key, of a
 * conversation of its own; returns its id once the archive lists it.
 */
async function archivedExchange() {
  const newest = async () => (await api("GET", "/api/v1/llm/exchanges?order=desc&limit=1")).items[0]?.id;
  const before = await newest();
  const resp = await fetch(env("API_URL") + "/llm/v1/chat/completions", {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model: env("MODEL"), messages: [{ role: "user", content: `list ${Math.random()}` }] }),
  });
  assert.equal(resp.status, 200, await resp.text());
  for (const until = Date.now() + 10_000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
    const id = await newest();
    if (id !== before) return id;
  }
  assert.fail("the exchange is not listed after 10 s");
}

test("the LLM archive: the newest first, one that ends while shown at the top of the first page, older ones on the next pages", async () => {
  // The daemon's own pages, of two here (the console asks for 100): more
  // exchanges than three pages.
  const windows = []; // the since of each page asked for
  await page.route(/\/api\/v1\/llm\/exchanges\?/, (route) => {
    const u = new URL(route.request().url());
    u.searchParams.set("limit", "2");
    windows.push(u.searchParams.get("since"));
    return route.continue({ url: u.href });
  });
  const streams = [];
  const followed = (r) => /\/api\/v1\/llm\/exchanges\/stream\?/.test(r.url()) && streams.push(r.url());
  try {
    for (let i = 0; i < 2; i++) await archivedExchange();
    const listed = (await api("GET", "/api/v1/llm/exchanges?order=desc&limit=6")).items.map((x) => x.id);
    assert.equal(listed.length, 6);
    const ids = page.locator("table.exchanges tbody tr.x td:first-child code");
    await page.goto(consoleURL + "/llm");
    await expectTexts(ids, listed.slice(0, 2));
    await page.getByRole("status").getByText("live: new exchanges appear at the top").waitFor();
    // One that ends while the page is shown: at its top, the page's own
    // below it.
    const made = await archivedExchange();
    await expectTexts(ids, [made, ...listed.slice(0, 2)], 15_000);
    await shot("archive-newest-first");
    // The older pages: no live tail there, nothing followed.
    page.on("request", followed);
    await page.getByRole("link", { name: "Older" }).click();
    await expectTexts(ids, listed.slice(2, 4));
    await page.getByRole("link", { name: "Older" }).click();
    await expectTexts(ids, listed.slice(4, 6));
    // The older pages page the first page's window, not one from when
    // each was opened.
    assert.equal(new Set(windows).size, 1, `the pages' windows: ${windows}`);
    assert.ok(windows[0], "no window's start asked for");
    assert.equal(await page.getByText("live: new exchanges").count(), 0);
    page.off("request", followed);
    assert.deepEqual(streams, []);
    // Back to the newest: the one made before is on the page itself.
    await page.getByRole("link", { name: "Newest" }).click();
    await expectTexts(ids, [made, listed[0]]);
    await page.getByRole("status").getByText("live").waitFor();
  } finally {
    page.off("request", followed);
    await page.unrouteAll();
  }
});

test("a conversation whose last answer was streamed: its transcript ends with that answer, put together", async () => {
  const x = fakeExchange({
    id: "llx_streamed",
    sandboxId: "sb-stream",
    conversationId: "conv-stream",
    stream: true,
    usage: {},
    createdAt: new Date().toISOString(),
  });
  const chunk = (delta) => `data: ${JSON.stringify({ choices: [{ index: 0, delta }] })}\n\n`;
  const detail = {
    ...x,
    request: { body: JSON.stringify({ model: "coder", stream: true, messages: [{ role: "user", content: "say hi" }] }) },
    response: { status: 200, body: chunk({ role: "assistant", content: "Hi " }) + chunk({ content: "<i>there</i>" }) + "data: [DONE]\n\n" },
  };
  const conv = { id: "conv-stream", sandboxId: "sb-stream", startedAt: x.createdAt, lastAt: x.createdAt, usage: {}, exchanges: [x] };
  await page.route(/\/api\/v1\/sandboxes\/sb-stream\/conversations$/, (route) =>
    route.fulfill({ contentType: "application/json", body: JSON.stringify({ items: [conv] }) }),
  );
  await page.route(/\/api\/v1\/llm\/exchanges\/llx_streamed$/, (route) =>
    route.fulfill({ contentType: "application/json", body: JSON.stringify(detail) }),
  );
  await page.goto(`${consoleURL}/sandboxes/sb-stream/conversations`);
  await page.getByRole("button", { name: "Show transcript" }).click();
  const transcript = page.getByRole("list", { name: "transcript" });
  await transcript.getByText("Hi <i>there</i>", { exact: true }).waitFor();
  assert.equal(await transcript.getByText("a streamed answer").count(), 0);
  await page.unrouteAll();
});

test("a run's events, cut before its end, are followed again after the last one shown, none twice, each saying what it is", async () => {
  const id = "run-cut";
  const t = (s) => new Date(Date.parse("2026-01-01T00:00:00Z") + s * 1000).toISOString();
  const log = [
    { seq: 1, time: t(1), type: "phase", phase: "agent" },
    { seq: 2, time: t(2), type: "output", stream: "stdout", text: "before the cut" },
    { seq: 3, time: t(3), type: "output", stream: "stdout", text: "after the cut" },
    { seq: 4, time: t(4), type: "liveness", text: "the sandbox missed a heartbeat" },
    { seq: 5, time: t(5), type: "end", status: "succeeded", reason: "done" },
  ];
  let streams = 0;
  const run = (status) => ({
    id,
    batch_id: "b-cut",
    task: "cut",
    agent: "custom",
    repeat: 0,
    status,
    phase: status === "running" ? "agent" : "done",
    created_at: t(0),
    llm: { requests: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0 },
  });
  await page.route(/\/api\/v1\/runs\/run-cut$/, (route) =>
    route.fulfill({ contentType: "application/json", body: JSON.stringify(run(streams < 2 ? "running" : "succeeded")) }),
  );
  // The first stream ends after two events, as one a restarting daemon
  // closes; the next, as the daemon does, sends the events after the seq
  // it is asked to resume after.
  const afters = [];
  await page.route(/\/api\/v1\/runs\/run-cut\/events(\?.*)?$/, (route) => {
    streams++;
    const after = new URL(route.request().url()).searchParams.get("after");
    afters.push(after);
    const events = streams === 1 ? log.slice(0, 2) : log.filter((e) => e.seq > Number(after ?? 0));
    return route.fulfill({ contentType: "text/event-stream", body: sse(events.map((e) => ["event", e])) });
  });
  await page.goto(`${consoleURL}/runs/${id}`);
  await page.getByText("before the cut", { exact: true }).waitFor();
  await page.locator(".ev-end").waitFor({ timeout: 10_000 });
  await page.getByText("after the cut", { exact: true }).waitFor();
  assert.equal(await page.getByText("before the cut", { exact: true }).count(), 1);
  assert.equal(await page.locator("ol.run-events li").count(), 5);
  // A liveness event says what happened.
  await page.getByText("liveness: the sandbox missed a heartbeat", { exact: true }).waitFor();
  assert.equal(streams, 2);
  assert.deepEqual(afters, [null, "2"]);
  await page.unrouteAll();
});

test("the overview: its warm pool, and the runs that failed with their reasons", async () => {
  // Its failures are one page of each list, newest first: what it reads
  // stays the same however many runs and sandboxes failed.
  const lists = [];
  const listed = (r) => /\/api\/v1\/(runs|sandboxes)\?/.test(r.url()) && lists.push(new URL(r.url()));
  page.on("request", listed);
  await nav("Overview").click();
  const pools = page.getByRole("table", { name: "warm pools" });
  await pools.locator("tr").filter({ hasText: "python" }).filter({ hasText: "1 of 1" }).waitFor({ timeout: 180_000 });
  // The compare test's six failed runs: custom's two of the model that
  // fails, and opencode's four.
  const failures = page.getByRole("table", { name: "recent failures" });
  await failures.locator("tr").filter({ hasText: "console-compare" }).first().waitFor();
  assert.equal(await failures.locator("tr").filter({ hasText: "console-compare" }).locator(".status-failed").count(), 6);
  // Its reason, as the run has it.
  await failures.getByText("the agent exited 3, not 0").first().waitFor();
  await shot("overview-pools-failures");
  page.off("request", listed);
  assert.deepEqual(lists.map((u) => u.pathname).sort(), ["/api/v1/runs", "/api/v1/sandboxes"]);
  for (const u of lists) {
    assert.equal(u.searchParams.get("order"), "desc", u.href);
    assert.equal(u.searchParams.get("limit"), "8", u.href);
    assert.equal(u.searchParams.get("cursor"), null, u.href);
  }
});

test("the runs and sandboxes lists: the newest first, a new one on the first page at once, older ones on the next pages", async () => {
  // The daemon's own pages, of two here (the console asks for 100 runs,
  // 50 sandboxes a page): more runs and sandboxes than a page.
  await page.route(/\/api\/v1\/(runs|sandboxes)\?/, (route) => {
    const u = new URL(route.request().url());
    u.searchParams.set("limit", "2");
    return route.continue({ url: u.href });
  });
  const made = [];
  try {
    const ids = page.locator("table.list tbody tr td:first-child code");
    const newestFirst = async (list) => (await api("GET", `/api/v1/${list}`)).items.map((x) => x.id).reverse();
    const runs = await newestFirst("runs");
    assert.ok(runs.length > 4, `${runs.length} runs`);
    await nav("Runs").click();
    await expectTexts(ids, runs.slice(0, 2));
    await page.getByRole("link", { name: "Older" }).click();
    await expectTexts(ids, runs.slice(2, 4));
    await page.getByRole("link", { name: "Newest" }).click();
    await expectTexts(ids, runs.slice(0, 2));

    for (let i = 0; i < 3; i++) made.push((await api("POST", "/api/v1/sandboxes", { image })).id);
    await nav("Sandboxes").click();
    const sandboxes = await newestFirst("sandboxes");
    assert.deepEqual(sandboxes.slice(0, 3), made.toReversed());
    await expectTexts(ids, sandboxes.slice(0, 2));
    await page.getByRole("link", { name: "Older" }).click();
    await expectTexts(ids, sandboxes.slice(2, 4));
    await page.getByRole("link", { name: "Newest" }).click();
    await expectTexts(ids, sandboxes.slice(0, 2));
    // One made while the page is shown is on it at its next read.
    made.push((await api("POST", "/api/v1/sandboxes", { image })).id);
    await expectTexts(ids, [made[3], made[2]], 15_000);
    await shot("sandboxes-newest-first");
  } finally {
    await page.unrouteAll();
    for (const id of made) await api("DELETE", `/api/v1/sandboxes/${id}`);
  }
});

test("keyboard first: the skip link, then the navigation", async () => {
  await page.goto(consoleURL + "/runs");
  await page.getByRole("heading", { name: "Task runs" }).waitFor();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Skip to content");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Sandboxes");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Sandboxes" }).waitFor();
});

test("a phone-width screen scrolls no page sideways", async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [name, path] of [
    ["overview", "/"],
    ["sandboxes", "/sandboxes"],
    ["runs", "/runs"],
    ["templates", "/templates"],
    ["images", "/images"],
    ["sessions", "/sessions"],
    ["llm", "/llm"],
  ]) {
    await page.goto(consoleURL + path);
    await page.locator("main h1").waitFor();
    const [scroll, width] = await page.evaluate(() => [document.documentElement.scrollWidth, innerWidth]);
    assert.ok(scroll <= width, `${path}: ${scroll}px wide on a ${width}px screen`);
    await shot(`phone-${name}`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
});

test("a key the API no longer takes brings the prompt back", async () => {
  await page.evaluate(() => sessionStorage.setItem("agent2env.key", "revoked-key"));
  await page.goto(consoleURL + "/sandboxes");
  await page.getByText("refused the key").waitFor();
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  // The page asked for is the one shown.
  await page.getByRole("heading", { name: "Sandboxes" }).waitFor();
});

test("a dark theme, and no error or CSP violation on any page", async () => {
  await page.getByLabel("theme").selectOption("dark");
  await nav("Overview").click();
  await page.getByText("Capacity").waitFor();
  await shot("overview-dark");
  assert.deepEqual([...problems, ...failed], []);
});

// Performance: what the issue asks of the console's pages, from answers the
// test gives the page itself (page.route): a submission of 10,000 runs (its
// runs list's first page, and its compare matrix, which reads them all, a
// page of 1,000 a request) and a conversation of 500 exchanges (its
// exchanges listed, then its transcript: 1,000 turns with 499 tool calls,
// each paired with its result). Each figure is the time from asking for the
// page to its last row shown, printed as a benchmark line.
test("10,000 runs and a conversation of 500 exchanges render within a second", async () => {
  const t0 = Date.parse("2026-01-01T00:00:00Z");
  const iso = (ms) => new Date(t0 + ms).toISOString();
  const runs = Array.from({ length: 10_000 }, (_, i) => ({
    id: `run-perf-${String(i).padStart(5, "0")}`,
    batch_id: "b-perf",
    task: "perf",
    agent: `agent-${i % 4}`,
    model: `model-${i % 5}`,
    repeat: Math.floor(i / 20),
    status: i % 3 ? "succeeded" : "failed",
    phase: "done",
    reason: i % 3 ? undefined : "the agent exited 1, not 0",
    created_at: iso(i * 1000),
    started_at: iso(i * 1000 + 10),
    ended_at: iso(i * 1000 + 5000),
    llm: { requests: 3, input_tokens: 1000 + i, output_tokens: 200, cached_tokens: 0 },
  }));
  await page.route(/\/api\/v1\/runs\?.*batch=b-perf/, (route) => {
    const q = new URL(route.request().url()).searchParams;
    const from = Number(q.get("cursor") ?? 0);
    const limit = Number(q.get("limit"));
    const to = Math.min(runs.length, from + limit);
    const body = { items: runs.slice(from, to), next_cursor: to < runs.length ? String(to) : undefined };
    return route.fulfill({ contentType: "application/json", body: JSON.stringify(body) });
  });
  const exchanges = Array.from({ length: 500 }, (_, i) =>
    fakeExchange({
      id: `llx_perf${String(i).padStart(3, "0")}`,
      sandboxId: "sb-perf",
      conversationId: "conv-perf",
      usage: { inputTokens: 100 * i, outputTokens: 20 },
      createdAt: iso(i * 2000),
    }),
  );
  const messages = [{ role: "user", content: "fix the bug" }];
  for (let i = 0; i < 499; i++) {
    const call = { id: `call_${i}`, type: "function", function: { name: "run", arguments: JSON.stringify({ cmd: `grep -n bug file${i}.py` }) } };
    messages.push({ role: "assistant", content: `step ${i}: look at file${i}.py`, tool_calls: [call] });
    messages.push({ role: "tool", tool_call_id: call.id, content: `file${i}.py:${i}: <b>bug</b> here\n`.repeat(3) });
  }
  const last = exchanges[499];
  const detail = {
    ...last,
    request: { body: JSON.stringify({ model: "coder", messages }) },
    response: { status: 200, body: JSON.stringify({ choices: [{ message: { role: "assistant", content: "fixed it" } }] }) },
  };
  await page.route(/\/api\/v1\/sandboxes\/sb-perf\/conversations$/, (route) =>
    route.fulfill({
      contentType: "application/json",
      body: JSON.stringify({
        items: [{ id: "conv-perf", sandboxId: "sb-perf", startedAt: iso(0), lastAt: iso(998000), usage: {}, exchanges }],
      }),
    }),
  );
  await page.route(/\/api\/v1\/llm\/exchanges\/llx_perf499$/, (route) =>
    route.fulfill({ contentType: "application/json", body: JSON.stringify(detail) }),
  );

  // Timed in the page: from the navigation (or the click) to the frame
  // after the last element is there, polled every frame.
  const figures = {};
  const time = async (name, how) => {
    figures[name] = await page.evaluate(async ({ path, click, sel, count, text }) => {
      const start = performance.now();
      if (path) {
        history.pushState(null, "", path);
        dispatchEvent(new PopStateEvent("popstate"));
      } else {
        [...document.querySelectorAll("button")].find((b) => b.textContent === click).click();
      }
      const done = () => {
        const els = document.querySelectorAll(sel);
        return els.length >= count && (!text || [...els].some((e) => e.textContent === text));
      };
      await new Promise((resolve) => {
        const check = () => (done() ? requestAnimationFrame(() => setTimeout(resolve)) : requestAnimationFrame(check));
        check();
      });
      return performance.now() - start;
    }, how);
    console.log(`Benchmark${name}\t1\t${Math.round(figures[name] * 1e6)} ns/op`);
  };
  await page.goto(consoleURL + "/");
  await page.getByText("Capacity").waitFor();
  await time("ConsoleRunsList10000Runs", { path: "/runs?batch=b-perf", sel: 'a[href="/runs/run-perf-00099"]', count: 1 });
  await time("ConsoleCompare10000Runs", { path: "/runs/compare?batch=b-perf", sel: "td.cell", count: 20 });
  assert.equal(await page.locator("td.cell").filter({ hasText: "pass@1" }).count(), 20);
  await shot("perf-compare");
  await time("ConsoleConversation500Exchanges", { path: "/sandboxes/sb-perf/conversations", sel: "table.exchanges tbody tr.x", count: 500 });
  await time("ConsoleTranscript500Exchanges", { click: "Show transcript", sel: "pre.part-text", count: 1, text: "fixed it" });
  assert.equal(await page.locator(".part-tool").count(), 499);
  assert.equal(await page.locator(".part-tool .tool-result").count(), 499);
  await shot("perf-transcript");
  await page.unrouteAll();
  // The target, 1 s each, is a benchmark's to report (make bench prints
  // these lines; a shared machine's load moves them): this test fails only
  // on ten times that, the mark of a page that went quadratic or asks the
  // server once per row.
  for (const [name, ms] of Object.entries(figures)) {
    if (ms > 1000) console.log(`${name}: ${Math.round(ms)} ms, over the 1 s target (load ${os.loadavg()[0].toFixed(1)})`);
    assert.ok(ms <= 10000, `${name}: ${Math.round(ms)} ms: over ten times the 1 s target`);
  }
});
