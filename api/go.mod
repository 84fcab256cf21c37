module github.com/agent2env/agent2env/api

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0
	github.com/gorilla/websocket v1.5.4-0.20250319132907-e064f32e3674
)

require golang.org/x/net v0.26.0 // indirect
