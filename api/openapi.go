package api

import _ "embed"

// OpenAPI is the OpenAPI 3.0 document (openapi.yaml in this package) that
// describes every endpoint of the daemon: the source of truth of the wire
// contract, which the server's tests check the server against. Clients may
// serve it or validate against it; it must not be modified.
//
//go:embed openapi.yaml
var OpenAPI []byte
