// Package api is agent2env's wire contract: the JSON types of the REST API
// under /api/v1, its error body and error codes. It is its own module and
// imports nothing of the server, so that clients (the Go SDK in package
// client, the CLI, third parties) depend on the contract alone.
//
// The sandbox, template and prepull surface is wire-compatible with the
// LiteBoxd v1 API: field names follow it exactly (camelCase where LiteBoxd
// uses an alias, such as templateVersion and accessToken; snake_case where
// it does not, such as exit_code and created_at). agent2env's additions are
// marked as such. openapi.yaml in this directory describes every endpoint.
//
// Each error code has its HTTP status and the generic code of its class
// (CodeStatus, CodeClass): the one table by which the daemon answers and
// the Go client maps answers back to error classes. Package sse is the
// event-stream writer and reader both sides use.
package api
