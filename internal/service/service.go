// Package service holds the daemon's operations as plain Go calls that
// take and return the API's wire types (package api), so that every
// surface only translates its transport and no rule is written twice.
// The rules that live here and nowhere else: the API view of a sandbox (its
// access token and accessUrl), template overrides versus a request's image
// fields, exec requests and their limits, list pages (filtered by status and
// metadata, and counted), metadata patches and expiry renewals, a running
// sandbox's usage beside its limits, the port gateway's
// access checks, the wire view of images and of sandbox files, and the
// sandbox scope of code-interpreter contexts, and the terminal's one-time
// browser tickets (one sandbox, one use, 30 s, a bound on the live ones),
// and persistent terminals (named, held by the sandbox's agent, replayed
// from an offset, one writer with takeover, listed in a sandbox's view).
//
// # The rule: surfaces go through this package
//
// Surfaces are the packages that speak a protocol to clients:
// internal/httpapi (REST), internal/mcpserver (MCP), internal/gateway (the
// port gateway), internal/opensandbox (the OpenSandbox API), internal/e2b
// (the E2B API), and every later one (terminal, console). A surface decodes, calls one service method and encodes;
// errors are mapped once, at its edge, with errdefs. It imports from this
// module only:
//
//   - api and its subpackages (the wire types);
//   - internal/service (this package);
//   - internal/errdefs, internal/auth, internal/metrics,
//     internal/buildinfo, internal/jsonbody, internal/utf8cut and
//     internal/llm/caller (the edge's helpers);
//   - other surfaces, where one mounts another;
//   - the domain packages whose one exported service speaks the api wire
//     types and owns its rules: internal/template, internal/prepull,
//     internal/session, internal/run, internal/task (decoding task files)
//     and internal/llm/gate (the LLM proxy's own surface).
//
// Never internal/manager, internal/store (and its backends),
// internal/sandbox, internal/runtime*, internal/agent, internal/image,
// internal/pool, internal/contexts (through Contexts),
// internal/llm/archive (through LLMExchanges), internal/netproxy,
// internal/netguard or internal/daemon: whatever a surface needs of those
// becomes a method or a type of this package (CleanPath, Sink, Language).
//
// The task runner (internal/run) uses sandboxes the same way, through
// Sandboxes: what it needs beyond the API's routes (CreateManaged,
// WaitRunning, CheckDead, Ping, CPUTime; Stat, ReadDir and Mkdir with
// FileStat) is here, api-typed, so that no sandbox rule is copied into the
// runner; it keeps only its own run records in the store. This package
// imports no surface and not the runner.
// internal/repotest's TestLayers holds the same lists and fails on an
// import they forbid.
//
// # Shape
//
// Sandboxes and Images sit over packages that speak internal types
// (manager records, image.Image); Contexts over contexts.Service, which
// speaks api already, adds only the scope its two route forms share;
// LLMExchanges over the LLM archive.
//
// Operations that stream (exec output, image progress) are split in two:
// the call checks the request and returns the function that runs it, which
// reports events to a callback. A caller refuses bad requests before it
// commits to a streaming response, as contexts.Service.Stream does.
//
// A rule more than one surface keeps is an operation here, not a copy in
// each: CreateAndWait is the create of the surfaces whose clients expect a
// sandbox that runs (OpenSandbox, E2B), with the failure classified.
//
// Errors are errdefs classes, with the API's wire codes where it has one,
// mapped once at each caller's edge (errdefs.Classify, errdefs.WriteHTTP).
// Every method takes ctx first; the services hold no per-request state and
// are safe for concurrent use.
package service
