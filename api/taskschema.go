package api

import _ "embed"

// TaskSchema is the JSON Schema (draft 2020-12, task.schema.json in this
// package) of task files, the YAML or JSON documents `agent2env task`
// runs. Editors and other tools may validate task files with it; the
// daemon's loader accepts the same files.
//
//go:embed task.schema.json
var TaskSchema []byte
