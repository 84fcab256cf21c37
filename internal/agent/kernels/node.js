// agent2env JavaScript kernel driver, run as `node -e "<this file>"`.
// Requests arrive on fd 3, each a "<marker> <n> <k> <m>\n" line, n bytes of UTF-8
// code, then m bytes of k "NAME=value\0" entries set in process.env for the run.
// JSON lines go to fd 4: "ready" once at start, "display" for rich output during a
// run, and "done" (result bundle, error) at its end, after the marker has been
// written raw to fd 1 and then fd 2. SIGINT interrupts a run and is ignored between runs.
// Each run is a script in the main context, its completion value the result:
// globals and top-level declarations persist (a let, const or class cannot be
// declared again in a later run). Code that only compiles with top-level await runs
// inside an async arrow function instead: a single expression gives its value;
// statements are the function's body, their declarations stay local to the run and
// the result is what they return.
(function kernel() {
  'use strict';

  const fs = require('fs');
  const net = require('net');
  const util = require('util');
  const vm = require('vm');

  const CONTROL = 4;
  const INTERRUPTED = Symbol('interrupted');
  // Stack frames from here down are the driver's or node's own.
  const DRIVER_FRAME = /^\s+at .*(\[eval\]|node:vm:|node:internal\/process\/task_queues)/;

  let cells = 0;
  let interrupt = null; // set while a run awaits its result: ends the wait on SIGINT

  // On a blocking pipe, fs.writeSync writes all of its data before it returns.
  function send(message) {
    fs.writeSync(CONTROL, JSON.stringify(message) + '\n');
  }

  function inspect(value) {
    try {
      return util.inspect(value, {depth: 4});
    } catch {
      return '[value that cannot be inspected]';
    }
  }

  function isError(value) {
    return value instanceof Error || util.types.isNativeError(value);
  }

  // An error's stack without the driver's frames, or inspect() of another value.
  function describe(value) {
    try {
      if (!isError(value)) return inspect(value);
      const lines = str(value.stack).split('\n');
      const end = lines.findIndex((line) => DRIVER_FRAME.test(line));
      return (end < 0 ? lines : lines.slice(0, end)).join('\n');
    } catch {
      return '[value that cannot be described]';
    }
  }

  function str(value) {
    try {
      return String(value);
    } catch {
      return inspect(value);
    }
  }

  // display(value) shows util.inspect(value); display(value, mimeType) shows value
  // as that type: JSON for application/json, base64 for bytes, else a string.
  function display(value, mimeType) {
    let data;
    if (mimeType === undefined) data = {'text/plain': inspect(value)};
    else if (mimeType === 'application/json') data = {[mimeType]: value === undefined ? null : value};
    else if (value instanceof Uint8Array) data = {[mimeType]: Buffer.from(value).toString('base64')};
    else data = {[mimeType]: String(value)};
    send({type: 'display', data});
  }

  function compile(code, filename) {
    try {
      return new vm.Script(code, {filename});
    } catch (err) {
      if (!(err instanceof SyntaxError) || !/\bawait\b/.test(code)) throw err;
      // Top-level await: the code is an async arrow function's expression body if it
      // is a single expression, else its block body.
      for (const body of [`(\n${code}\n)`, `{\n${code}\n}`]) {
        try {
          return new vm.Script(`(async () => ${body})()`, {filename, lineOffset: -1});
        } catch {}
      }
      throw err; // the plain script's error is the one to show
    }
  }

  function untilInterrupted(thenable) {
    return new Promise((resolve, reject) => {
      interrupt = () => reject(INTERRUPTED);
      Promise.resolve(thenable).then(resolve, reject);
    }).finally(() => {
      interrupt = null;
    });
  }

  async function run(code) {
    const filename = `<cell-${++cells}>`;
    let script;
    try {
      script = compile(code, filename);
    } catch (err) {
      return {result: null, error: syntaxError(err)};
    }
    try {
      // breakOnSigint stops synchronous code. Node swaps its SIGINT handling around
      // the script, and a SIGINT in the instant it starts or ends kills the process.
      let value = script.runInThisContext({breakOnSigint: true, displayErrors: false});
      if (typeof value?.then === 'function') value = await untilInterrupted(value);
      return {result: value === undefined ? null : {'text/plain': inspect(value)}, error: null};
    } catch (err) {
      return {result: null, error: runtimeError(err)};
    }
  }

  function syntaxError(err) {
    // The stack starts with the offending line and a caret, then the message.
    const stack = str(err.stack).split('\n').filter((line) => !/^\s+at /.test(line));
    return {name: str(err.name), value: str(err.message), traceback: stack.join('\n'), kind: 'syntax'};
  }

  function runtimeError(err) {
    try {
      if (err === INTERRUPTED || (err instanceof Error && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED')) {
        return {name: 'KeyboardInterrupt', value: 'interrupted', traceback: '', kind: 'runtime'};
      }
      if (isError(err)) return {name: str(err.name), value: str(err.message), traceback: describe(err), kind: 'runtime'};
      return {name: typeof err, value: str(err), traceback: describe(err), kind: 'runtime'};
    } catch {
      return {name: typeof err, value: '[value that cannot be described]', traceback: '', kind: 'runtime'};
    }
  }

  function finish(marker, {result, error}) {
    fs.writeSync(1, marker);
    fs.writeSync(2, marker);
    send({type: 'done', result, error});
  }

  // setEnv sets each "NAME=value" entry in process.env for a run, and returns
  // the function that puts back what they replaced.
  function setEnv(entries) {
    const saved = entries.map((entry) => {
      const name = entry.slice(0, entry.indexOf('='));
      const had = Object.hasOwn(process.env, name) ? process.env[name] : undefined;
      process.env[name] = entry.slice(name.length + 1);
      return [name, had];
    });
    return () => {
      for (const [name, had] of saved.reverse()) {
        if (had === undefined) delete process.env[name];
        else process.env[name] = had;
      }
    };
  }

  async function* requests(stream) {
    let buffer = Buffer.alloc(0);
    for await (const chunk of stream) {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const eol = buffer.indexOf(10);
        if (eol < 0) break;
        const [marker, codeBytes, , envBytes] = buffer.toString('latin1', 0, eol).split(' ');
        const codeEnd = eol + 1 + Number(codeBytes);
        const end = codeEnd + Number(envBytes);
        if (buffer.length < end) break;
        yield {
          marker: Buffer.from(marker, 'latin1'),
          code: buffer.toString('utf8', eol + 1, codeEnd),
          env: buffer.toString('utf8', codeEnd, end).split('\0').slice(0, -1),
        };
        buffer = buffer.subarray(end);
      }
    }
  }

  async function serve() {
    send({type: 'ready', language: 'javascript', version: process.versions.node});
    for await (const {marker, code, env} of requests(new net.Socket({fd: 3, readable: true, writable: false}))) {
      const restore = setEnv(env);
      try {
        finish(marker, await run(code));
      } finally {
        restore();
      }
    }
    process.exit(0);
  }

  // Node writes to a full pipe asynchronously; blocking writes keep output in order
  // with the markers and display lines.
  for (const stream of [process.stdout, process.stderr]) stream._handle?.setBlocking?.(true);
  process.on('SIGINT', () => interrupt?.());
  process.on('uncaughtException', (err) => fs.writeSync(2, `Uncaught ${describe(err)}\n`));
  process.on('unhandledRejection', (reason) => fs.writeSync(2, `Unhandled rejection: ${describe(reason)}\n`));
  globalThis.display = display;
  serve();
})();
