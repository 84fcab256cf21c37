// Package service holds the daemon's operations as plain Go calls that
// take and return the API's wire types (package api), so that every
// surface (REST in internal/httpapi, the port gateway, the MCP server, the
// task runner) only translates its transport and no rule is written twice.
// The rules that live here and nowhere else: the API view of a sandbox (its
// access token and accessUrl), template overrides versus a request's image
// fields, exec requests and their limits, list pages, the port gateway's
// access checks, the wire view of images, and the sandbox scope of
// code-interpreter contexts.
//
// Sandboxes and Images sit over packages that speak internal types
// (manager records, image.Image); Contexts over contexts.Service, which
// speaks api already, adds only the scope its two route forms share.
// Domain services that need nothing more are called directly:
// template.Service and prepull.Service.
//
// Operations that stream (exec output, image progress) are split in two:
// the call checks the request and returns the function that runs it, which
// reports events to a callback. A caller refuses bad requests before it
// commits to a streaming response, as contexts.Service.Stream does.
//
// Errors are errdefs classes, with the API's wire codes where it has one,
// mapped once at each caller's edge (errdefs.Classify, errdefs.WriteHTTP).
// Every method takes ctx first; the services hold no per-request state and
// are safe for concurrent use.
package service
