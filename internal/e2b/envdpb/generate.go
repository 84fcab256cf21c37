// Package envdpb holds E2B's envd protocol, the in-sandbox daemon's
// Connect services, as E2B publishes it: the .proto files under spec
// (copied unchanged from github.com/e2b-dev/E2B, Apache-2.0) and the Go
// code generated from them in the subpackages process, filesystem and
// their connect packages. "make envd-proto" regenerates that code.
package envdpb

//go:generate protoc -I spec --go_out=. --go_opt=paths=source_relative --go_opt=Mprocess/process.proto=github.com/agent2env/agent2env/internal/e2b/envdpb/process --go_opt=Mfilesystem/filesystem.proto=github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem --connect-go_out=. --connect-go_opt=paths=source_relative --connect-go_opt=Mprocess/process.proto=github.com/agent2env/agent2env/internal/e2b/envdpb/process --connect-go_opt=Mfilesystem/filesystem.proto=github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem process/process.proto filesystem/filesystem.proto
