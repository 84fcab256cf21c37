// Command scriptedmodel serves agenttest.ScriptedModel on an address, so
// that tests can run it where a Go test cannot, such as inside a sandbox
// beside an agent CLI. It prints the address once it listens.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/agent2env/agent2env/internal/agents/agenttest"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18555", "address to listen on")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on", l.Addr())
	log.Fatal(http.Serve(l, &agenttest.ScriptedModel{URL: "http://" + l.Addr().String(), Log: os.Stdout}))
}
